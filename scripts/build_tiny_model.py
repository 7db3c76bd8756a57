"""Build the tiny tool-calling model committed in src/openforgerl/assets/tiny/.

A Qwen3-architecture model (hidden 256, 2 layers, 4 heads / 2 kv heads, head_dim 64, tied embeddings,
vocab = the committed tokenizer, max_position_embeddings 8192), initialised from a fixed seed and
warmed up by supervised training on synthetic two-turn conversations of the compact `zero` harness:

    user task -> assistant  <think>..</think> + one hermes <tool_call>      (turn 1)
    tool result -> assistant <think>..</think> + a short final answer       (turn 2)

rendered through `ChatFormat` (the same template vLLM and the local engine use) with the tools as
OpenAI function tools. Curriculum: the tool format is learned in ~150 steps, but copying argument
strings out of the prompt needs an induction circuit that a 2-layer model did not form on the tool
chats alone (0% exact arguments after 450 steps); short "repeat this text" chats mixed in from step
300 (--copy-aux-from) form it within ~200 steps. Training stops at the first evaluation (every 50
steps) whose greedy success on 20 held-out instances (exact tool call + clean final answer) reaches
TARGET_SUCCESS (0.5): RL starts from a policy that sometimes succeeds and still has room.
Deterministic (fixed seeds, 1 thread, no dropout); --state makes a stopped build resumable
bit-for-bit. Cost: ~1 CPU-second per step idle; on the shared 2-core box the build took ~40 min.
The committed weights are this script's default run: 1500 steps (never reached 0.5 at a 20-instance
eval; 0.40 at step 1500), 0.48 greedy success on 50 fresh held-out instances (seed 98765).

Tool schemas (OpenAI `tools` entries; the envs/harness side must expose the same names/fields):

    write_file  {path: string, content: string}              "Write text to a file."
    read_file   {path: string}                               (distractor)
    todo_add    {title: string}                              "Add a todo item."
    todo_list   {}                                           (distractor)
    mail_send   {to: string, subject: string, body: string}  "Send an email."
    mail_list   {}                                           (distractor)
All parameters are required strings; each episode offers its tool plus 0-2 shuffled distractors.

Task templates (user turn): "Write the text 'X' to the file Y.", "Add a todo 'X'.",
"Send an email to A with subject 'S' and body 'B'." (several phrasings each). The model answers
with exactly one tool call, then (after the tool result) a one-line summary.

The committed weights are made in two stages (both deterministic):

    # stage 1: format + copying on the synthetic families (~1500 steps, about 25 min on 2 idle cores)
    python scripts/build_tiny_model.py --out /tmp/stage1
    # stage 2: the same families shaped exactly like the `zero` harness on the Claw `sft` tasks
    # (zero's system prompt, the Claw tool schemas, the retry hint), starting from stage 1
    python scripts/build_tiny_model.py --stage zero --init /tmp/stage1 --lr 5e-4 --max-steps 300 \
        --eval-every 25 --min-eval-step 0 --eval-n 30 --copy-aux-from 0 --threads 2 --target 0.6 \
        --episodes 2000
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "src/openforgerl/assets/tiny"
SEED = 1234
TARGET_SUCCESS = 0.5
SYSTEM_PROMPTS = [
    None,
    "You are a helpful assistant.",
    "You are zero, a compact coding agent. Use the tools to "
    "complete the task, then reply with a short summary.",
    "You are an agent working in a sandbox. Call tools to act. When done, answer briefly.",
]


def _fn(name: str, description: str, props: dict[str, str]) -> dict[str, Any]:
    properties = {k: {"type": "string", "description": v} for k, v in props.items()}
    params = {"type": "object", "properties": properties, "required": list(props)}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


TOOLS: dict[str, dict[str, Any]] = {
    "write_file": _fn(
        "write_file",
        "Write text to a file.",
        {"path": "File path.", "content": "Text to write."},
    ),
    "read_file": _fn("read_file", "Read a file.", {"path": "File path."}),
    "todo_add": _fn("todo_add", "Add a todo item.", {"title": "Todo text."}),
    "todo_list": _fn("todo_list", "List the todo items.", {}),
    "mail_send": _fn(
        "mail_send",
        "Send an email.",
        {"to": "Recipient address.", "subject": "Subject.", "body": "Body."},
    ),
    "mail_list": _fn("mail_list", "List the emails in the inbox.", {}),
}

WORDS = (
    "alpha beta gamma delta report budget meeting lunch review draft notes plan launch sprint design "
    "invoice summary update agenda travel hotel flight ticket garden coffee music python server backup "
    "deploy release bug fix test party dinner book paper slides demo chart data city river cloud apple"
).split()
NAMES = "alice bob carol dave erin frank grace heidi ivan judy mallory oscar peggy trent victor wendy".split()
DOMAINS = ["example.com", "corp.io", "mail.org", "team.dev"]
EXTS = ["txt", "md", "log", "csv"]


@dataclass(frozen=True)
class Episode:
    """One task instance: the user message, the expected call and the tool's reply."""

    family: str
    user: str
    tool: str
    arguments: dict[str, str]
    result: str
    final: str
    plan: str


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _write_file(rng: random.Random) -> Episode:
    path = f"{rng.choice(WORDS)}{rng.choice(['', '_' + rng.choice(WORDS)])}.{rng.choice(EXTS)}"
    text = _phrase(rng, rng.randint(1, 3))
    user = rng.choice(
        [
            f"Write the text '{text}' to the file {path}.",
            f"Create the file {path} containing '{text}'.",
            f"Please save '{text}' into {path}.",
        ]
    )
    return Episode(
        "write_file",
        user,
        "write_file",
        {"path": path, "content": text},
        json.dumps({"ok": True, "bytes": len(text)}),
        f"I wrote '{text}' to {path}.",
        "I need to write a file.",
    )


def _todo_add(rng: random.Random) -> Episode:
    title = _phrase(rng, rng.randint(1, 3))
    user = rng.choice(
        [f"Add a todo '{title}'.", f"Put '{title}' on my todo list.", f"Add the task '{title}' to my todos."]
    )
    return Episode(
        "todo_add",
        user,
        "todo_add",
        {"title": title},
        json.dumps({"ok": True, "id": rng.randint(1, 99)}),
        f"Added the todo '{title}'.",
        "I need to add a todo.",
    )


def _mail_send(rng: random.Random) -> Episode:
    to = f"{rng.choice(NAMES)}@{rng.choice(DOMAINS)}"
    subject, body = _phrase(rng, rng.randint(1, 2)), _phrase(rng, rng.randint(1, 3))
    user = rng.choice(
        [
            f"Send an email to {to} with subject '{subject}' and body '{body}'.",
            f"Email {to}: subject '{subject}', body '{body}'.",
        ]
    )
    return Episode(
        "mail_send",
        user,
        "mail_send",
        {"to": to, "subject": subject, "body": body},
        json.dumps({"ok": True, "message_id": f"m{rng.randint(100, 999)}"}),
        f"I sent the email to {to}.",
        "I need to send an email.",
    )


FAMILIES = [_write_file, _todo_add, _mail_send]


class ZeroDistribution:
    """Stage 2: episodes shaped exactly like the `zero` harness on the Claw `sft` tasks.

    Same vocabulary and task families as stage 1, but with zero's own system prompt and the Claw
    registry's tool schemas in the order the tasks offer them, plus the transient-failure hint some
    tasks carry. Instructions equal to a shipped task's are never generated (they stay unseen).
    """

    def __init__(self) -> None:
        from openforgerl.env.world_tools import function_tools, tools_for
        from openforgerl.envs.claw.suite import claw_runtimes
        from openforgerl.envs.claw.suite.families import SFT_TOOLS
        from openforgerl.harness.zero.loop import SYSTEM_PROMPT

        self.system = SYSTEM_PROMPT
        self.tools = [dict(t) for t in function_tools(tools_for(names=SFT_TOOLS))]
        self.shipped = {rt.instruction.split("\n")[0] for rt in claw_runtimes(tag="sft")}

    def episode(self, rng: random.Random) -> Episode:
        while True:
            ep = rng.choice(FAMILIES)(rng)
            if ep.user not in self.shipped:
                break
        if rng.random() < 0.25:
            ep = Episode(
                ep.family,
                ep.user + "\n\n(If a tool fails transiently, retry it.)",
                ep.tool,
                ep.arguments,
                ep.result,
                ep.final,
                ep.plan,
            )
        return ep

    def make(self, rng: random.Random) -> tuple[Episode, list[dict[str, Any]], str | None]:
        return self.episode(rng), self.tools, self.system


DISTRIBUTION: ZeroDistribution | None = None  # set by --stage zero


def make_episode(rng: random.Random) -> tuple[Episode, list[dict[str, Any]], str | None]:
    """An episode plus the tool list it is offered (its own tool + shuffled distractors)."""
    if DISTRIBUTION is not None:
        return DISTRIBUTION.make(rng)
    ep = rng.choice(FAMILIES)(rng)
    others = [t for t in TOOLS if t != ep.tool]
    names = [ep.tool, *rng.sample(others, rng.randint(0, 2))]
    rng.shuffle(names)
    return ep, [TOOLS[n] for n in names], rng.choice(SYSTEM_PROMPTS)


def turn1_messages(ep: Episode, system: str | None) -> list[dict[str, Any]]:
    msgs = [{"role": "system", "content": system}] if system else []
    return [*msgs, {"role": "user", "content": ep.user}]


def turn2_messages(ep: Episode, system: str | None, echo_reasoning: bool) -> list[dict[str, Any]]:
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": ep.tool, "arguments": json.dumps(ep.arguments)},
    }
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    if echo_reasoning:
        assistant["reasoning"] = ep.plan
    tool = {"role": "tool", "tool_call_id": "call_0", "content": ep.result}
    return [*turn1_messages(ep, system), assistant, tool]


def completion1(ep: Episode) -> str:
    call = json.dumps({"name": ep.tool, "arguments": ep.arguments})
    return f"<think>\n{ep.plan}\n</think>\n\n<tool_call>\n{call}\n</tool_call><|im_end|>"


def completion2(ep: Episode) -> str:
    return f"<think>\nThe tool succeeded.\n</think>\n\n{ep.final}<|im_end|>"


def build_examples(chat: Any, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """(ids, loss_mask) sequences. Most episodes are one sequence holding both turns (the harness echoes
    the reasoning back, so turn 2's prompt extends turn 1 exactly); some add a turn-2 example whose
    history has no reasoning (a harness that drops it)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ep, tools, system = make_episode(rng)
        p1, c1 = chat.prompt_ids(turn1_messages(ep, system), tools), chat.encode(completion1(ep))
        p2 = chat.prompt_ids(turn2_messages(ep, system, echo_reasoning=True), tools)
        assert p2[: len(p1) + len(c1)] == p1 + c1, "template does not extend turn 1 exactly"
        c2 = chat.encode(completion2(ep))
        gap = len(p2) - len(p1) - len(c1)
        out.append(
            (
                p1 + c1 + p2[len(p1) + len(c1) :] + c2,
                [0] * len(p1) + [1] * len(c1) + [0] * gap + [1] * len(c2),
            )
        )
        if rng.random() < 0.3:
            p3 = chat.prompt_ids(turn2_messages(ep, system, echo_reasoning=False), tools)
            out.append((p3 + c2, [0] * len(p3) + [1] * len(c2)))
    return out


def build_copy_examples(chat: Any, n: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """Short 'repeat this text' chats: cheap sequences that teach the copy circuit (induction heads)
    the tool arguments need; mixed in after the tool format is learned (--copy-aux-from)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        pool = rng.choice([WORDS, NAMES, [f"{w}.{e}" for w in WORDS[:20] for e in EXTS]])
        text = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 5)))
        user = rng.choice(
            [f"Repeat exactly: '{text}'", f"Say '{text}'.", f"The text is '{text}'. Repeat it."]
        )
        prompt = chat.prompt_ids([{"role": "user", "content": user}])
        completion = chat.encode(f"<think>\nI repeat it.\n</think>\n\n{text}<|im_end|>")
        out.append((prompt + completion, [0] * len(prompt) + [1] * len(completion)))
    return out


def make_config(vocab_size: int) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        tie_word_embeddings=True,
        max_position_embeddings=8192,
        rope_theta=10000.0,
        rms_norm_eps=1e-6,
        bos_token_id=None,
        eos_token_id=2,
        pad_token_id=0,
        torch_dtype="float32",
    )


def collate(batch: list[tuple[list[int], list[int]]], pad: int) -> tuple[Any, Any, Any]:
    import torch

    length = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), length), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.bool)
    attn = torch.zeros((len(batch), length), dtype=torch.long)
    for i, (seq, loss_mask) in enumerate(batch):
        ids[i, : len(seq)] = torch.tensor(seq)
        mask[i, : len(seq)] = torch.tensor(loss_mask, dtype=torch.bool)
        attn[i, : len(seq)] = 1
    return ids, mask, attn


def loss_fn(model: Any, ids: Any, mask: Any, attn: Any) -> Any:
    """Cross-entropy on the sampled (mask 1) tokens only; the vocab projection runs only there."""
    import torch

    hidden = model.model(input_ids=ids, attention_mask=attn).last_hidden_state
    targets = mask[:, 1:]
    logits = model.lm_head(hidden[:, :-1][targets])
    return torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][targets])


def greedy(model: Any, prompt: list[int], max_new: int, eos: int) -> list[int]:
    import torch

    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False, eos_token_id=eos, pad_token_id=0
    )
    return out[0, len(prompt) :].tolist()


def evaluate(model: Any, chat: Any, n: int, seed: int) -> float:
    """Greedy success on held-out episodes: exact tool call in turn 1 and a clean finish in turn 2."""
    from openforgerl.engines.chat_format import parse_output

    rng = random.Random(seed)
    model.eval()
    ok = 0
    for _ in range(n):
        ep, tools, system = make_episode(rng)
        text = chat.decode(
            greedy(model, chat.prompt_ids(turn1_messages(ep, system), tools), 80, chat.eos_token_id)
        )
        calls = parse_output(text.removesuffix("<|im_end|>")).tool_calls
        good = len(calls) == 1 and calls[0].name == ep.tool and json.loads(calls[0].arguments) == ep.arguments
        if good:
            t2 = chat.prompt_ids(turn2_messages(ep, system, echo_reasoning=True), tools)
            good = chat.decode(greedy(model, t2, 64, chat.eos_token_id)).endswith("<|im_end|>")
        ok += good
    model.train()
    return ok / n


def save_state(path: Path, step: int, model: Any, opt: Any, sched: Any, rng: random.Random) -> None:
    """Everything needed to continue the run bit-for-bit (no dropout: torch's RNG is unused after init)."""
    import torch

    torch.save(
        {
            "step": step,
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "sched": sched.state_dict(),
            "rng": rng.getstate(),
        },
        path,
    )


def export_state(path: Path) -> Any:
    import torch
    from transformers import Qwen3ForCausalLM

    from openforgerl.engines.chat_format import ChatFormat

    st = torch.load(path, weights_only=False)
    model = Qwen3ForCausalLM(make_config(ChatFormat.load(ASSETS).tokenizer.get_vocab_size()))
    model.load_state_dict(st["model"])
    print(f"exporting the checkpoint of step {st['step']}")
    return model


def train(args: argparse.Namespace) -> Any:
    import torch
    from transformers import Qwen3ForCausalLM

    from openforgerl.engines.chat_format import ChatFormat

    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    chat = ChatFormat.load(ASSETS)
    model = Qwen3ForCausalLM(make_config(chat.tokenizer.get_vocab_size()))
    if args.init is not None:  # stage 2 starts from the stage-1 weights
        model = Qwen3ForCausalLM.from_pretrained(args.init, dtype=torch.float32)
    data = build_examples(chat, args.episodes, SEED)
    copies = build_copy_examples(chat, 4000, SEED + 3)
    rng = random.Random(SEED + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 30))
    first = 1
    if args.state and args.state.exists():  # continue an interrupted build exactly where it stopped
        st = torch.load(args.state, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        sched.load_state_dict(st["sched"])
        rng.setstate(st["rng"])
        first = st["step"] + 1
    model.train()
    t0 = time.time()
    for step in range(first, args.max_steps + 1):
        loss = loss_fn(model, *collate(rng.sample(data, args.batch), pad=0))
        if args.copy_aux_from is not None and step > args.copy_aux_from:  # own forward: no padding to 400
            loss = (loss + loss_fn(model, *collate(rng.sample(copies, args.copy_batch), pad=0))) / 2
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
        if step >= args.min_eval_step and step % args.eval_every == 0:
            if args.state:
                save_state(args.state, step, model, opt, sched, rng)
            success = evaluate(model, chat, args.eval_n, SEED + 2)
            print(f"step {step} held-out greedy success {success:.2f}", flush=True)
            if success >= args.target:
                break
    return model, chat


def write_tokenizer_files(out: Path) -> None:
    """tokenizer.json + chat template + tokenizer_config.json so AutoTokenizer and vLLM load the dir."""
    template = (ASSETS / "chat_template.jinja").read_text()
    if out.resolve() != ASSETS.resolve():
        shutil.copy(ASSETS / "tokenizer.json", out / "tokenizer.json")
        (out / "chat_template.jinja").write_text(template)
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 8192,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "bos_token": None,
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": template,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def save(model: Any, out: Path) -> None:
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(eos_token_id=[2, 0], pad_token_id=0, bos_token_id=None)
    model.save_pretrained(out, safe_serialization=True)
    write_tokenizer_files(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ASSETS)
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--episodes", type=int, default=3000)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--min-eval-step", type=int, default=150)
    ap.add_argument("--eval-n", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--state", type=Path, default=None, help="checkpoint file to save to / resume from")
    ap.add_argument("--copy-aux-from", type=int, default=300, help="mix in copy chats after this step")
    ap.add_argument("--copy-batch", type=int, default=16)
    ap.add_argument(
        "--stage",
        choices=["synthetic", "zero"],
        default="synthetic",
        help="synthetic: stage 1 (format + copying); zero: stage 2 on zero-harness-shaped episodes",
    )
    ap.add_argument("--init", type=Path, default=None, help="start from this model dir (stage 2)")
    ap.add_argument("--target", type=float, default=TARGET_SUCCESS, help="stop at this held-out success")
    ap.add_argument(
        "--export-state",
        action="store_true",
        help="only write the model of --state (a run stopped at its last checkpoint)",
    )
    args = ap.parse_args()
    global DISTRIBUTION
    if args.stage == "zero":
        DISTRIBUTION = ZeroDistribution()
    model = export_state(args.state) if args.export_state else train(args)[0]
    save(model, args.out)
    print(f"saved to {args.out}")


if __name__ == "__main__":
    main()
