"""Drives tweepy's archive calls against Threadline for archive.test.ts, through the README's lines.

usage (THREADLINE_URL and THREADLINE_TOKEN set): tweepy_archive.py QUOTED_ID
  prints one JSON object of what each call gave, every page followed
"""
import json
import pathlib
import re
import sys

readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
# The README's tweepy lines define `client`, pointed at Threadline.
exec(re.search(r"```python\n(.*?)```", readme, re.S).group(1))

import tweepy  # noqa: E402 (the README's lines import it too)


def every(method, *args, **kwargs):
    # tweepy warns about Posts without edit_history_tweet_ids, which Threadline sends when asked.
    fields = ["edit_history_tweet_ids"]
    return [str(p.id) for p in tweepy.Paginator(method, *args, tweet_fields=fields, **kwargs).flatten()]


quoted = sys.argv[1]
print(
    json.dumps(
        {
            "users": [u.username for u in client.get_users(ids=["1000", "1001"]).data],
            "user": str(client.get_user(username="User_3").data.id),
            "tweets": every(client.get_users_tweets, "1001", max_results=5),
            "mentions": every(client.get_users_mentions, "1002", max_results=5),
            "quotes": every(client.get_quote_tweets, quoted, max_results=10),
        }
    ),
    flush=True,
)
