"""Ask a person before an agent acts: Interlock's POST /approvals from Python's standard library.

    INTERLOCK_URL=http://localhost:8080 INTERLOCK_TOKEN=<requester token> python3 ask_person.py
"""
import json
import os
import urllib.request
import uuid


def ask_person(agent, tool, args, context="", wait=600):
    """Asks whether `agent` may call `tool` with `args`, and waits until a person decides.
    Returns {"status": "APPROVED"|"DECLINED"|"EXPIRED", "args", "reason", "decidedBy", ...}:
    on APPROVED, run the tool with answer["args"] (a person may have edited them)."""
    url = os.environ.get("INTERLOCK_URL", "http://localhost:8080")
    headers = {"Authorization": "Bearer " + os.environ["INTERLOCK_TOKEN"], "Content-Type": "application/json"}
    body = json.dumps({"agentId": agent, "toolName": tool, "args": args, "context": context,
                       "idempotencyKey": str(uuid.uuid4())}).encode()  # a retry gets the same request
    req = urllib.request.Request(f"{url}/approvals?wait={wait}", data=body, headers=headers)
    while True:
        with urllib.request.urlopen(req, timeout=wait + 30) as resp:
            answer = json.load(resp)
        if answer["status"] != "PENDING":
            return answer
        print("waiting for a person:", answer["url"], flush=True)  # then keep waiting
        req = urllib.request.Request(f"{url}/approvals/{answer['runId']}?wait={wait}", headers=headers)


if __name__ == "__main__":
    answer = ask_person("deploy-bot", "deploy", {"service": "api", "version": "1.2.3"},
                        context="Deploying **api** 1.2.3: the canary has been green for an hour.")
    if answer["status"] == "APPROVED":
        print("APPROVED by", answer["decidedBy"], "- deploying", json.dumps(answer["args"], sort_keys=True))
    else:
        print(answer["status"], "by", answer["decidedBy"], "-", answer["reason"])
