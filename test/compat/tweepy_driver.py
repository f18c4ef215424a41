"""Drives tweepy against Threadline for tweepy.test.ts, through the lines the README shows.

usage (THREADLINE_URL and THREADLINE_TOKEN set, as the README's lines read them):
  tweepy_driver.py rest QUERY ID,ID,…   one JSON object of what each call gave
  tweepy_driver.py stream               "connected", then the first Post's JSON
"""
import json
import pathlib
import re
import sys

mode = sys.argv[1]
readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
# The README's tweepy lines define `client` and `stream`, pointed at Threadline.
exec(re.search(r"```python\n(.*?)```", readme, re.S).group(1))

import tweepy  # noqa: E402 (the README's lines import it too)


def out(value):
    print(json.dumps(value), flush=True)


if mode == "rest":
    query, ids = sys.argv[2], sys.argv[3].split(",")
    looked_up = client.get_tweets(ids=ids, tweet_fields=["created_at", "conversation_id", "edit_history_tweet_ids"])
    searched = [
        p.id
        for p in tweepy.Paginator(
            client.search_recent_tweets,
            query=query,
            max_results=10,
            tweet_fields=["edit_history_tweet_ids"],
        ).flatten()
    ]
    counted = client.get_recent_tweets_count(query=query, granularity="hour")
    added = stream.add_rules(tweepy.StreamRule("from:tweepy_user", tag="tweepy"))
    listed = stream.get_rules()
    stream.delete_rules([r.id for r in added.data])
    out(
        {
            "lookup": [
                {"id": str(p.id), "conversation_id": str(p.conversation_id)}
                for p in looked_up.data
            ],
            "search": [str(i) for i in searched],
            "count": counted.meta["total_tweet_count"],
            "rules": [r.value for r in listed.data],
        }
    )
elif mode == "stream":

    def first_post(response):
        out(
            {
                "id": str(response.data.id),
                "text": response.data.text,
                "rules": [r.tag for r in response.matching_rules],
                "users": [u.username for u in response.includes.get("users", [])],
            }
        )
        stream.disconnect()

    stream.on_connect = lambda: out("connected")
    stream.on_response = first_post
    stream.filter(expansions=["author_id"], tweet_fields=["edit_history_tweet_ids"])
else:
    sys.exit(f"unknown mode {mode}")
