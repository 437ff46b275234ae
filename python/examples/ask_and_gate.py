"""Ask a question and gate a tool call through lev, then run the approved args.

Start `lev demo` and paste the LEV_URL / LEV_TOKEN lines it prints, then:

    python examples/ask_and_gate.py

Answer in the dashboard, or with `lev respond ID ...` in another terminal.
"""

from __future__ import annotations

import subprocess
import uuid

import lev


def main() -> None:
    client = lev.Client()  # LEV_URL and LEV_TOKEN from the environment
    print("asking; answer in the dashboard or with `lev respond`")
    answer = client.ask("Which directory should I list?", session_id="py-example")
    print("the person answered:", answer)

    gatekeeper = lev.Gatekeeper(
        client=client, session_id="py-example", sandbox_mode="workspace-write"
    )
    try:
        call = gatekeeper.gate(
            request_id=f"call-{uuid.uuid4().hex[:8]}",
            tool_name="shell",
            args_json={"argv": ["ls", answer or "."], "cwd": "."},
        )
    except lev.Denied as refusal:
        print(refusal.text)  # what the model would read, the person's feedback included
        return
    # Verified, checked against this call, nonce spent: run what was approved
    # (the person's edit when they edited it).
    out = subprocess.run(call.args["argv"], capture_output=True, text=True, check=False)
    print(call.tool_result_text(out.stdout))


if __name__ == "__main__":
    main()
