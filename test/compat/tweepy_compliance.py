"""Drives tweepy's batch compliance calls against Threadline for compliance.test.ts.

usage (THREADLINE_URL and THREADLINE_TOKEN set, as the README's lines read them):
  tweepy_compliance.py ID,ID,…   creates a job, uploads the ids as X's docs show (requests.put,
                                 no token), polls it, downloads the result; one JSON object out
"""
import json
import pathlib
import re
import sys
import time

readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
# The README's tweepy lines define `client`, pointed at Threadline.
exec(re.search(r"```python\n(.*?)```", readme, re.S).group(1))

import requests  # noqa: E402 (the README's lines import it too)

ids = sys.argv[1].split(",")
job = client.create_compliance_job(type="tweets", name="tweepy").data
uploaded = requests.put(
    job["upload_url"], data="\n".join(ids), headers={"Content-Type": "text/plain"}
)
uploaded.raise_for_status()
deadline = time.monotonic() + 60
while True:
    polled = client.get_compliance_job(job["id"]).data
    if polled["status"] in ("complete", "failed", "expired") or time.monotonic() > deadline:
        break
    time.sleep(0.2)
result = requests.get(polled["download_url"])
listed = client.get_compliance_jobs(type="tweets", status="complete").data
print(
    json.dumps(
        {
            "created": job["status"],
            "status": polled["status"],
            "lines": [json.loads(line) for line in result.text.splitlines() if line],
            "listed": [j["id"] for j in listed or []],
            "id": job["id"],
        }
    )
)
