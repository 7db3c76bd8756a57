"""Build the tiny vision-language model committed in src/openforgerl/assets/tiny-vl/.

A Qwen3-VL-architecture model (`Qwen3VLForConditionalGeneration`): the language half has exactly the
dimensions of the tiny text model (hidden 256, ffn 768, 2 layers, 4 heads / 2 kv, head_dim 64, tied
embeddings, M-RoPE sections [8, 12, 12] interleaved, rope_theta 10000) and starts from its committed
weights (assets/tiny: it already emits hermes `<tool_call>` JSON; with text-only positions M-RoPE
with theta 10000 *is* its RoPE), plus a small vision tower (depth 2, hidden 64, ffn 128, 2 heads,
patch 16, spatial merge 2, temporal patch 2, out 256, deepstack at layer 0). Vocabulary: the project
tokenizer (4102 ids) + `<|vision_start|>` 4102, `<|vision_end|>` 4103, `<|image_pad|>` 4104,
`<|video_pad|>` 4105. Template: the project's ChatML + hermes tools, no thinking (parsers: hermes, no
reasoning parser); image parts in user, system and tool messages render as
`<|vision_start|><|image_pad|><|vision_end|>`.

Image size policy (fixed server-side in preprocessor_config.json): max_pixels 320*192 = 61,440, so a
640x360 or 1280x720 screenshot becomes 320x160 = a 10x20 patch grid = 50 image tokens. Why so small:
the warm-up must fit ~10 minutes on a shared 2-core box and every rollout step re-sends its
screenshots; 50 tokens per screen keeps a 5-screenshot history under 400 prompt tokens. Larger
screens cost nothing more (they are downscaled); the policy is identical in rollout, training, eval.

Warm-up: supervised training on synthetic screenshots (`render_screen`: PIL, 640x360, a light page,
a header bar, grey text lines, 1-4 buttons with white labels; 1 button on 2 screens in 5, so the model
first learns to find *a* button). Buttons sit in the cells of a 4x4 layout grid below the header,
their centres jittered by up to 12x6 px, sizes 70-120 x 26-42 px: free placement did not learn
in 230 steps (0/20 clicks at steps 100 and 200, the loss at the chance level of the coordinate
digits), the grid did (0.10 at step 200). Each label has its own button colour (OK green, Cancel red,
Submit blue, Next orange, Back purple, Search teal), as real UIs colour primary/secondary buttons: at
50 tokens per screen the tower cannot read glyphs, so the colour is what makes "the button labelled
X" findable for a 3 M-parameter model. An RL environment that wants the warm-up to transfer should
draw its screens from `render_screen` (or the same layout/colour rules).

Prompt = SYSTEM + user [image, "Click the button labelled 'X'." (3 phrasings)]; target = `<tool_call>\n` +
`{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [x, y]}}` +
`\n</tool_call><|im_end|>` with the button centre in 0-1000 normalised coordinates (Qwen3-VL's convention);
loss on the target tokens only. Two stages (both deterministic), because the hermes tools preamble is ~270
tokens and tripled the step time:

    # stage 1: no tools block; AdamW lr 2e-3 (vision tower 3x), batch 8, 1500 steps (~18 min here, half
    # of it on a loaded box; 600 steps gave 0.00 held-out, 1500 gave 0.23 without tools, 0.01 with)
    python scripts/build_tiny_vl.py --out /tmp/tiny-vl-stage1
    # stage 2: half the prompts carry tools=[COMPUTER_USE], as a harness sends them (300 steps, ~6 min)
    python scripts/build_tiny_vl.py --init /tmp/tiny-vl-stage1 --tools-share 0.5 --max-steps 300

Accuracy = share of greedy clicks on held-out screens (seed HELD_OUT_SEED) inside the target button.
Deterministic by construction (fixed seeds, 1 thread, no dropout; screens drawn on the fly from a
seeded RNG); byte-identical rebuilds were not checked.

    python scripts/build_tiny_vl.py --eval-only     # accuracy of the committed weights

Stage 3, app screens (`--app-screens N`; what the committed weights are now): the synthetic warm-up clicked
where its buttons were (y 400-499 of 1000) and never hit a target of the GUI quickstart's tasks. This stage
renders the real board and calendar apps (`env.apps`: the app's own HTML, in Debian Chromium
launched as `envs.browser.computer` does, at the tasks' 1280x720 viewport, DPR 1, the service's fonts.conf)
with random data (`random_board`: 3-8 cards with invented titles in random columns, "move card X to column
Y", the target its `fwd-`/`back-` button; `random_calendar`: 4-6 days from a random week, 3-8 invented
events, "delete event X", the target its `delete-` button; no title of a test-split task is ever drawn,
nor any task instance), reads the target's box from the DOM, and trains the click at its centre on the
exact prompt zero-gui sends with `prompt: compact` (COMPACT_SYSTEM_PROMPT, tools=[compact_schema], user
[screenshot, instruction in the tasks' wording]). At 50 image tokens the titles are not legible, so the model
learns where such buttons are, not which one: on a task it picks one of the right kind, sometimes the right
one, which is what GRPO needs. Two runs (AdamW, batch 8, vision lr 3x, 2 threads):

    python scripts/build_tiny_vl.py --init src/openforgerl/assets/tiny-vl --out /tmp/tiny-vl-apps \
        --app-screens 800 --max-steps 400 --lr 1e-3 --eval-n 40 --eval-samples 16 --threads 2    # ~9 min here
    python scripts/build_tiny_vl.py --init /tmp/tiny-vl-apps --out /tmp/tiny-vl-apps2 \
        --app-screens 1600 --max-steps 400 --lr 5e-4 --eval-n 40 --eval-samples 16 --threads 2   # ~11 min

Measured (first click inside the target box, on each train task's first screen; evaluation only):
after run 1, greedy 0/5, sampled at T=1 0.15 (16 per task); after run 2 (committed): greedy 1/5
(board-move-03), sampled 0.19 (board-move 01/02/03: 0.00/0.12/0.25, calendar-delete 01/02: 0.06/0.00;
at step 100-400 of run 2 it read 0.20-0.24); random held-out app screens (seed APP_HELD_OUT_SEED) greedy
0.25 of 40. The synthetic-screen accuracy (40 screens) fell to 0.05 without tools / 0.03 with tools:
that skill is no longer what the weights are for. `--eval-only` also prints these app-screen numbers.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import re
import time
from pathlib import Path
from typing import Any

from openforgerl.harness.zero_gui.tool import COMPACT_SYSTEM_PROMPT, compact_schema

ROOT = Path(__file__).resolve().parents[1]
TEXT_ASSETS = ROOT / "src/openforgerl/assets/tiny"
ASSETS = ROOT / "src/openforgerl/assets/tiny-vl"
SEED = 4321
HELD_OUT_SEED = 98765
VISION_TOKENS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
SCREEN = (640, 360)
PATCH, MERGE, TEMPORAL = 16, 2, 2
MIN_PIXELS, MAX_PIXELS = 32 * 32 * 4, 320 * 192
MEAN = STD = [0.5, 0.5, 0.5]
# The warm-up's prompt is the one zero-gui sends with `prompt: compact` (the harness owns it).
SYSTEM, COMPUTER_USE = COMPACT_SYSTEM_PROMPT, compact_schema()
LABELS = {
    "OK": (46, 160, 67),
    "Cancel": (200, 50, 50),
    "Submit": (40, 90, 200),
    "Next": (230, 140, 20),
    "Back": (130, 60, 170),
    "Search": (20, 150, 150),
}
LAYOUT_COUNTS = [1, 1, 2, 3, 4]  # buttons per screen (2 in 5 screens have one)
SLOTS = (4, 4)  # button layout grid (columns, rows) below the header; centres jittered by up to 12x6 px
ASKS = ["Click the button labelled '{}'.", "Click '{}'.", "Press the {} button."]

TEMPLATE_TEXT = r"""{%- macro render(content) %}
{%- if content is string %}{{- content }}
{%- elif content %}
{%- for part in content %}
{%- if part.type == 'image' or part.type == 'image_url' or part.type == 'input_image' %}{{- '<|vision_start|><|image_pad|><|vision_end|>' }}
{%- elif part.type == 'text' %}{{- part.text }}
{%- endif %}
{%- endfor %}
{%- endif %}
{%- endmacro %}
{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- render(messages[0].content) + '\n\n' }}{%- endif %}
{{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + render(messages[0].content) + '<|im_end|>\n' }}
{%- endif %}
{%- for m in messages %}
{%- if m.role == 'system' and loop.first %}
{%- elif m.role == 'system' or m.role == 'user' %}
{{- '<|im_start|>' + m.role + '\n' + render(m.content) + '<|im_end|>\n' }}
{%- elif m.role == 'assistant' %}
{{- '<|im_start|>assistant\n' }}
{{- render(m.content).lstrip('\n') }}
{%- if m.tool_calls %}
{%- for tc in m.tool_calls %}
{%- if (loop.first and m.content) or not loop.first %}{{- '\n' }}{%- endif %}
{{- '<tool_call>\n{"name": "' + tc.function.name + '", "arguments": ' }}
{%- if tc.function.arguments is string %}{{- tc.function.arguments }}{%- else %}{{- tc.function.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif m.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + render(m.content) + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- endif %}
"""  # noqa: E501  (the committed tiny-vl chat_template.jinja is these bytes)


def chat_template() -> str:
    return TEMPLATE_TEXT


# -- synthetic screens ------------------------------------------------------------------------------
def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def render_screen(rng: random.Random) -> tuple[Any, str, tuple[int, int, int, int]]:
    """A 640x360 page with 2-4 labelled buttons; returns (image, target label, target box in pixels)."""
    from PIL import Image, ImageDraw

    w, h = SCREEN
    bg = tuple(rng.randint(225, 250) for _ in range(3))
    img = Image.new("RGB", SCREEN, bg)
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, w, 28], fill=tuple(rng.randint(60, 110) for _ in range(3)))
    d.text(
        (10, 6),
        rng.choice(["Settings", "Checkout", "Inbox", "Search", "Form"]),
        fill=(255, 255, 255),
        font=_font(14),
    )
    for _ in range(rng.randint(1, 3)):  # grey text lines as clutter
        y = rng.randint(40, h - 20)
        d.rectangle([rng.randint(10, 200), y, rng.randint(220, 600), y + 4], fill=(190, 190, 190))
    labels = rng.sample(list(LABELS), rng.choice(LAYOUT_COUNTS))
    slots = rng.sample([(c, r) for c in range(SLOTS[0]) for r in range(SLOTS[1])], len(labels))
    boxes: list[tuple[int, int, int, int]] = []
    for label, (col, row) in zip(labels, slots, strict=True):
        cx = (col + 0.5) * w / SLOTS[0] + rng.randint(-12, 12)
        cy = 28 + (row + 0.5) * (h - 28) / SLOTS[1] + rng.randint(-6, 6)
        bw, bh = rng.randint(70, 120), rng.randint(26, 42)
        box = (round(cx - bw / 2), round(cy - bh / 2), round(cx + bw / 2), round(cy + bh / 2))
        boxes.append(box)
        d.rounded_rectangle(box, radius=6, fill=LABELS[label])
        d.text(
            ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2),
            label,
            fill=(255, 255, 255),
            font=_font(14),
            anchor="mm",
        )
    k = rng.randrange(len(labels))
    return img, labels[k], boxes[k]


def normalised_centre(box: tuple[int, int, int, int]) -> tuple[int, int]:
    w, h = SCREEN
    return round((box[0] + box[2]) / 2 / w * 1000), round((box[1] + box[3]) / 2 / h * 1000)


def data_url(img: Any) -> str:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def messages(label: str, url: str, rng: random.Random) -> list[dict[str, Any]]:
    ask = rng.choice(ASKS).format(label)
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": ask}],
        },
    ]


def completion(x: int, y: int) -> str:
    call = json.dumps({"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [x, y]}})
    return f"<tool_call>\n{call}\n</tool_call><|im_end|>"


# -- model directory -----------------------------------------------------------------------------------
def write_tokenizer(out: Path) -> Any:
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(TEXT_ASSETS / "tokenizer.json"))
    base = tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in VISION_TOKENS])
    assert [tok.token_to_id(t) for t in VISION_TOKENS] == list(range(base, base + 4))
    tok.save(str(out / "tokenizer.json"))
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
        "processor_class": "Qwen3VLProcessor",
        "chat_template": chat_template(),
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tok


def processor_settings() -> dict[str, Any]:
    return {
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL,
        "merge_size": MERGE,
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
        "image_mean": MEAN,
        "image_std": STD,
        "do_resize": True,
        "resample": 3,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "do_convert_rgb": True,
    }


def write_processor_files(out: Path) -> None:
    """Image-only processing (no torchvision needed to read it), plus the files
    vLLM's Qwen3VLProcessor loads."""
    image = {
        "image_processor_type": "Qwen2VLImageProcessorPil",
        "processor_class": "Qwen3VLProcessor",
        **processor_settings(),
    }
    video = {
        "video_processor_type": "Qwen3VLVideoProcessor",
        "processor_class": "Qwen3VLProcessor",
        **processor_settings(),
        "fps": 2,
        "min_frames": 4,
        "max_frames": 768,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(image, indent=2) + "\n")
    (out / "video_preprocessor_config.json").write_text(json.dumps(video, indent=2) + "\n")
    (out / "processor_config.json").write_text(
        json.dumps({"processor_class": "Qwen3VLProcessor"}, indent=2) + "\n"
    )
    (out / "openforgerl_parsers.json").write_text(
        json.dumps({"reasoning_parser": None, "tool_call_parser": "hermes"}, indent=2) + "\n"
    )


def make_config(vocab: int) -> Any:
    from transformers import Qwen3VLConfig

    text = dict(
        vocab_size=vocab,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=8192,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=2,
        bos_token_id=None,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "mrope_section": [8, 12, 12],
            "mrope_interleaved": True,
        },
    )
    vision = dict(
        depth=2,
        hidden_size=64,
        intermediate_size=128,
        num_heads=2,
        patch_size=PATCH,
        spatial_merge_size=MERGE,
        temporal_patch_size=TEMPORAL,
        out_hidden_size=256,
        deepstack_visual_indexes=[0],
        in_channels=3,
    )
    return Qwen3VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=vocab - 2,
        video_token_id=vocab - 1,
        vision_start_token_id=vocab - 4,
        vision_end_token_id=vocab - 3,
        tie_word_embeddings=True,
    )


def warm_start(model: Any) -> None:
    """Copy the tiny text model into the language half; the 4 new embedding rows stay as initialised."""
    import torch
    from safetensors.torch import load_file

    text = load_file(str(TEXT_ASSETS / "model.safetensors"))
    lm = model.model.language_model.state_dict()
    with torch.no_grad():
        for name, t in text.items():
            key = name.removeprefix("model.")
            if key == "embed_tokens.weight":
                lm[key][: t.shape[0]].copy_(t)
            else:
                lm[key].copy_(t)


# -- data, training, eval ---------------------------------------------------------------------------
def example(
    chat: Any, vision: Any, rng: random.Random, tools: bool = False
) -> tuple[list[int], list[int], Any, Any, tuple[int, ...]]:
    img, label, box = render_screen(rng)
    images = vision.process([img])
    prompt = vision.expand(
        chat.prompt_ids(messages(label, "data:,", rng), [COMPUTER_USE] if tools else None), images
    )
    target = chat.encode(completion(*normalised_centre(box)))
    return (
        prompt + target,
        [0] * len(prompt) + [1] * len(target),
        images.pixel_values,
        images.image_grid_thw,
        box,
    )


def batch_loss(model: Any, batch: list[Any], image_token: int) -> Any:
    import torch

    length = max(len(b[0]) for b in batch)
    ids = torch.zeros((len(batch), length), dtype=torch.long)
    mask = torch.zeros((len(batch), length), dtype=torch.bool)
    attn = torch.zeros((len(batch), length), dtype=torch.long)
    for i, (seq, loss_mask, *_rest) in enumerate(batch):
        ids[i, : len(seq)], mask[i, : len(seq)], attn[i, : len(seq)] = (
            torch.tensor(seq),
            torch.tensor(loss_mask) > 0,
            1,
        )
    out = model.model(
        input_ids=ids,
        attention_mask=attn,
        pixel_values=torch.cat([b[2] for b in batch]),
        image_grid_thw=torch.cat([b[3] for b in batch]),
        mm_token_type_ids=(ids == image_token).int(),
    )
    targets = mask[:, 1:]
    logits = model.lm_head(out.last_hidden_state[:, :-1][targets])
    return torch.nn.functional.cross_entropy(logits.float(), ids[:, 1:][targets])


CLICK_RE = re.compile(r'"coordinate": \[(\d+), (\d+)\]')


def evaluate(model: Any, chat: Any, vision: Any, n: int, seed: int, tools: bool = False) -> float:
    """Share of greedy clicks inside the target button on `n` fresh screens."""
    import torch

    rng = random.Random(seed)
    model.eval()
    hits = 0
    with torch.no_grad():
        for _ in range(n):
            ids, mask, pix, grid, box = example(chat, vision, rng, tools)
            prompt = ids[: mask.index(1)]
            inp = torch.tensor([prompt])
            out = model.generate(
                input_ids=inp,
                attention_mask=torch.ones_like(inp),
                pixel_values=pix,
                image_grid_thw=grid,
                mm_token_type_ids=(inp == vision.image_token_id).int(),
                max_new_tokens=48,
                do_sample=False,
                eos_token_id=2,
                pad_token_id=0,
            )
            text = chat.decode(out[0, len(prompt) :].tolist())
            m = CLICK_RE.search(text)
            if m and text.startswith("<tool_call>"):
                x, y = int(m.group(1)) / 1000 * SCREEN[0], int(m.group(2)) / 1000 * SCREEN[1]
                hits += box[0] <= x <= box[2] and box[1] <= y <= box[3]
    model.train()
    return hits / n


# -- app screens (`--app-screens`): the real board and calendar apps in Chromium ----------------------
APP_SCREEN = (
    1280,
    720,
)  # the browser tasks' viewport (envs.browser.screen: config "screen", default 1280x720)
APP_TRAIN_SEED, APP_HELD_OUT_SEED = 2468, 13579
WORDS_A = [
    "Draft",
    "Send",
    "Update",
    "Check",
    "Call",
    "Prepare",
    "Clean",
    "Sort",
    "Print",
    "Share",
    "Test",
    "Pay",
    "Sign",
    "Plan",
    "Renew",
    "Archive",
    "Edit",
    "Read",
    "File",
    "Ship",
]
WORDS_B = [
    "invoice",
    "newsletter",
    "roadmap",
    "contract",
    "backlog",
    "photos",
    "budget",
    "minutes",
    "tickets",
    "badges",
    "website",
    "survey",
    "slides",
    "notes",
    "receipts",
    "schedule",
    "poster",
    "lease",
]
EVENT_WORDS = [
    "Yoga",
    "Call with Sam",
    "Board meeting",
    "Haircut",
    "Code review",
    "Coffee chat",
    "Gym",
    "Interview",
    "Retro",
    "Parents evening",
    "Vet visit",
    "Design sync",
    "1:1 with Ana",
    "Workshop",
    "Piano lesson",
    "Car service",
    "Town hall",
    "Hackathon",
    "Dinner",
    "Flight",
    "Onboarding",
]


def _test_titles() -> set[str]:
    """Card and event titles of the board/calendar tasks of the *test* split: never drawn by the warm-up."""
    import tomllib

    out: set[str] = set()
    for task in (ROOT / "src/openforgerl/envs/gui/suite/tasks").glob("*-*"):
        toml = task / "task.toml"
        if (
            not toml.exists()
            or tomllib.loads(toml.read_text())["metadata"]["openforgerl"].get("split") != "test"
        ):
            continue
        apps = json.loads((task / "environment/gui.json").read_text()).get("apps", {})
        out |= {c["title"] for c in apps.get("board", {}).get("cards", [])}
        out |= {e["title"] for e in apps.get("calendar", {}).get("events", [])}
    return out


def random_board(rng: random.Random, banned: set[str]) -> tuple[dict[str, Any], str, str]:
    """Fixtures of a random board, the instruction and the selector of the right first click."""
    titles: list[str] = []
    while len(titles) < rng.randint(3, 8):
        t = f"{rng.choice(WORDS_A)} {rng.choice(WORDS_B)}"
        if t not in titles and t not in banned:
            titles.append(t)
    cols = ["todo", "doing", "done"]
    cards = [{"id": f"c{i + 1}", "title": t, "column": rng.choice(cols)} for i, t in enumerate(titles)]
    movable = [c for c in cards if c["column"] != "done"] if rng.random() < 0.85 else cards
    card = rng.choice(movable or cards)
    i = cols.index(card["column"])
    ahead = [c for c in cols[i + 1 :]]
    if ahead and (i == 0 or rng.random() < 0.85):
        to, sel = rng.choice(ahead), f"#fwd-{card['id']}"
    else:
        to, sel = rng.choice(cols[:i]), f"#back-{card['id']}"
    names = {"todo": "To do", "doing": "Doing", "done": "Done"}
    return (
        {"board": {"cards": cards}},
        f"On the to-do board, move the card '{card['title']}' to the {names[to]} column.",
        sel,
    )


def random_calendar(rng: random.Random, banned: set[str]) -> tuple[dict[str, Any], str, str]:
    import datetime as dt

    start = dt.date(2026, 1, 5) + dt.timedelta(days=7 * rng.randint(0, 40) + rng.choice([0, 0, 0, 1, 2]))
    days = [str(start + dt.timedelta(days=k)) for k in range(rng.choice([4, 5, 5, 5, 6]))]
    pool = [t for t in EVENT_WORDS if t not in banned]
    titles = rng.sample(pool, rng.randint(3, 8))
    times = [f"{h:02d}:{m:02d}" for h in range(8, 19) for m in (0, 30)]
    events = [
        {"id": f"e{i + 1}", "title": t, "date": rng.choice(days), "time": rng.choice(times)}
        for i, t in enumerate(titles)
    ]
    ev = rng.choice(events)
    return (
        {"calendar": {"days": days, "events": events}},
        f"Delete the '{ev['title']}' event from the calendar; keep every other event.",
        f"#delete-{ev['id']}",
    )


class AppRenderer:
    """One headless Debian Chromium (as `envs.browser.computer` launches it) at the tasks' viewport; an
    app page = the app's own server-side HTML (`WebApp.show`/`week`), the pixels the task's browser shows."""

    def __init__(self) -> None:
        import os

        from playwright.sync_api import sync_playwright

        from openforgerl.env.computer.chromium import CHROMIUM_ARGS, chromium_path
        from openforgerl.envs.gui.service import FONTS_CONF

        os.environ.setdefault("FONTCONFIG_FILE", str(FONTS_CONF))
        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS
        )
        ctx = self.browser.new_context(
            viewport={"width": APP_SCREEN[0], "height": APP_SCREEN[1]}, device_scale_factor=1
        )
        self.page = ctx.new_page()

    def render(self, fixtures: dict[str, Any], selector: str) -> tuple[bytes, tuple[int, int, int, int]]:
        from openforgerl.env.apps import APPS
        from openforgerl.env.apps._web import Store

        ((name, fx),) = fixtures.items()
        app = APPS[name](Store(), fx)
        html = (app.show if name == "board" else app.week)(None).body
        self.page.set_content(html, wait_until="load")
        png: bytes = self.page.screenshot(type="png")
        b = self.page.locator(selector).first.bounding_box()
        return png, (round(b["x"]), round(b["y"]), round(b["x"] + b["width"]), round(b["y"] + b["height"]))

    def close(self) -> None:
        self.browser.close()
        self._pw.stop()


def app_screens(n: int, seed: int) -> list[tuple[bytes, str, tuple[int, int, int, int]]]:
    """`n` random board / calendar screens (half each): (PNG, instruction, target box in pixels)."""
    rng, banned = random.Random(seed), _test_titles()
    r = AppRenderer()
    try:
        out = []
        for k in range(n):
            fx, ask, sel = (random_board if k % 2 == 0 else random_calendar)(rng, banned)
            png, box = r.render(fx, sel)
            out.append((png, ask, box))
        return out
    finally:
        r.close()


def train_task_screens() -> list[tuple[bytes, str, tuple[int, int, int, int], str]]:
    """Evaluation only: the first screen of each train-split board-move / calendar-delete task, its
    instruction and the box of its oracle's first click (never used as training data)."""
    import tomllib

    r = AppRenderer()
    out = []
    try:
        for task in sorted((ROOT / "src/openforgerl/envs/gui/suite/tasks").glob("*")):
            if not task.name.startswith(("board-move-", "calendar-delete-")):
                continue
            if tomllib.loads((task / "task.toml").read_text())["metadata"]["openforgerl"]["split"] != "train":
                continue
            fx = json.loads((task / "environment/gui.json").read_text())["apps"]
            sel = json.loads((task / "solution/actions.json").read_text())[0]["target"]
            png, box = r.render(fx, sel)
            out.append((png, (task / "instruction.md").read_text().strip(), box, task.name))
    finally:
        r.close()
    return out


def app_example(
    chat: Any, vision: Any, item: tuple[bytes, str, tuple[int, int, int, int]], rng: random.Random
) -> tuple[list[int], list[int], Any, Any, tuple[int, ...]]:
    """The harness's compact prompt (zero-gui `prompt: compact`: COMPACT_SYSTEM_PROMPT,
    tools=[compact_schema], user [screenshot, instruction]) and the click at a point of the target
    box (its centre +- a third)."""
    from PIL import Image

    png, ask, box = item
    images = vision.process([Image.open(io.BytesIO(png)).convert("RGB")]) if isinstance(png, bytes) else png
    msgs = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": [{"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": ask}],
        },
    ]
    prompt = vision.expand(chat.prompt_ids(msgs, [COMPUTER_USE]), images)
    w, h = APP_SCREEN
    x = round((box[0] + box[2]) / 2 / w * 1000)
    y = round((box[1] + box[3]) / 2 / h * 1000)
    target = chat.encode(completion(x, y))
    return (
        prompt + target,
        [0] * len(prompt) + [1] * len(target),
        images.pixel_values,
        images.image_grid_thw,
        box,
    )


def evaluate_apps(model: Any, chat: Any, vision: Any, items: list[Any], samples: int = 0) -> float:
    """Share of clicks inside the target box: greedy (samples=0) or `samples` draws at temperature 1 each."""
    import torch

    model.eval()
    hits = total = 0
    rng = random.Random(0)
    with torch.no_grad():
        for item in items:
            ids, mask, pix, grid, box = app_example(chat, vision, item[:3], rng)
            prompt = ids[: mask.index(1)]
            inp = torch.tensor([prompt] * max(1, samples))
            out = model.generate(
                input_ids=inp,
                attention_mask=torch.ones_like(inp),
                pixel_values=pix.repeat(max(1, samples), 1),
                image_grid_thw=grid.repeat(max(1, samples), 1),
                mm_token_type_ids=(inp == vision.image_token_id).int(),
                max_new_tokens=48,
                do_sample=samples > 0,
                temperature=1.0 if samples else None,
                top_k=0 if samples else None,
                eos_token_id=2,
                pad_token_id=0,
            )
            for row in out:
                text = chat.decode(row[len(prompt) :].tolist())
                m = CLICK_RE.search(text)
                total += 1
                if m and text.startswith("<tool_call>"):
                    x, y = int(m.group(1)) / 1000 * APP_SCREEN[0], int(m.group(2)) / 1000 * APP_SCREEN[1]
                    hits += box[0] <= x <= box[2] and box[1] <= y <= box[3]
    model.train()
    return hits / max(1, total)


def _rgb(png: bytes) -> Any:
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGB")


def load_parts(out: Path) -> tuple[Any, Any]:
    from transformers import AutoConfig

    from openforgerl.engines.local.model import load_chat_format
    from openforgerl.engines.local.vlm import VisionProcessor

    return load_chat_format(out), VisionProcessor(out, AutoConfig.from_pretrained(out))


def train(args: argparse.Namespace, out: Path) -> Any:
    import torch
    from transformers import Qwen3VLForConditionalGeneration

    torch.manual_seed(SEED)
    torch.set_num_threads(args.threads)
    chat, vision = load_parts(out)
    if args.init is not None:  # stage 2 starts from the stage-1 weights
        model = Qwen3VLForConditionalGeneration.from_pretrained(args.init, dtype=torch.float32)
    else:
        model = Qwen3VLForConditionalGeneration(make_config(chat.tokenizer.get_vocab_size()))
        warm_start(model)
    rng = random.Random(SEED + 1 + (args.init is not None))
    apps: list[Any] = []
    if args.app_screens:
        t = time.time()
        apps = [
            (vision.process([_rgb(png)]), ask, box)
            for png, ask, box in app_screens(args.app_screens, APP_TRAIN_SEED)
        ]
        held = app_screens(args.eval_n, APP_HELD_OUT_SEED)
        tasks = train_task_screens()
        print(
            f"rendered {len(apps) + len(held) + len(tasks)} app screens in {time.time() - t:.0f}s", flush=True
        )
    visual = list(model.model.visual.parameters())
    ids = {id(p) for p in visual}
    groups = [
        {"params": visual, "lr": args.lr * args.vision_lr_scale},
        {"params": [p for p in model.parameters() if id(p) not in ids], "lr": args.lr},
    ]
    opt = torch.optim.AdamW(groups, weight_decay=0.0, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20))
    model.train()
    t0 = time.time()
    for step in range(1, args.max_steps + 1):
        if apps:
            batch = [app_example(chat, vision, rng.choice(apps), rng) for _ in range(args.batch)]
        else:
            batch = [
                example(chat, vision, rng, args.tools_share > 0 and rng.random() < args.tools_share)
                for _ in range(args.batch)
            ]
        loss = batch_loss(model, batch, vision.image_token_id)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
        if apps and args.eval_every and (step % args.eval_every == 0 or step == args.max_steps):
            print(
                f"step {step} app screens: held-out greedy "
                f"{evaluate_apps(model, chat, vision, held[:40]):.2f}, "
                f"train tasks greedy {evaluate_apps(model, chat, vision, tasks):.2f}, "
                f"sampled {evaluate_apps(model, chat, vision, tasks, samples=16):.2f}",
                flush=True,
            )
        elif args.eval_every and step % args.eval_every == 0:
            print(
                f"step {step} held-out click accuracy {evaluate(model, chat, vision, 20, SEED + 2):.2f}",
                flush=True,
            )
    return model, chat, vision


def save(model: Any, out: Path) -> None:
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(eos_token_id=[2, 0], pad_token_id=0, bos_token_id=None)
    model.save_pretrained(out, safe_serialization=True)


def prepare_dir(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "chat_template.jinja").write_text(TEMPLATE_TEXT)
    make_config(write_tokenizer(out).get_vocab_size()).save_pretrained(out)
    write_processor_files(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ASSETS)
    ap.add_argument("--max-steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--vision-lr-scale", type=float, default=3.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-n", type=int, default=100)
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument(
        "--eval-samples", type=int, default=32, help="sampled clicks per train task (app screens)"
    )
    ap.add_argument("--init", type=Path, default=None, help="start from this model dir (stage 2)")
    ap.add_argument(
        "--tools-share",
        type=float,
        default=0.0,
        help="share of examples whose prompt carries tools=[COMPUTER_USE] (stage 2: 0.5)",
    )
    ap.add_argument(
        "--app-screens",
        type=int,
        default=0,
        help="train on this many rendered board/calendar app screens (needs --init; see the docstring)",
    )
    args = ap.parse_args()
    if args.eval_only:
        import torch
        from transformers import Qwen3VLForConditionalGeneration

        torch.set_num_threads(args.threads)
        chat, vision = load_parts(args.out)
        model = Qwen3VLForConditionalGeneration.from_pretrained(args.out, dtype=torch.float32)
    else:
        prepare_dir(args.out)
        model, chat, vision = train(args, args.out)
        save(model, args.out)
    if args.app_screens or args.eval_only:
        held, tasks = app_screens(args.eval_n, APP_HELD_OUT_SEED), train_task_screens()
        print(
            f"app screens: held-out random screens greedy {evaluate_apps(model, chat, vision, held):.3f} "
            f"({len(held)} screens, seed {APP_HELD_OUT_SEED})"
        )
        for item in tasks:
            print(
                f"  {item[3]}: greedy {evaluate_apps(model, chat, vision, [item]):.2f}, "
                f"sampled (T=1) {evaluate_apps(model, chat, vision, [item], samples=args.eval_samples):.2f}"
            )
        print(
            f"train tasks: greedy {evaluate_apps(model, chat, vision, tasks):.3f}, sampled (T=1, "
            f"{args.eval_samples} each) "
            f"{evaluate_apps(model, chat, vision, tasks, samples=args.eval_samples):.3f}"
        )
    for tools in (False, True):
        acc = evaluate(model, chat, vision, args.eval_n, HELD_OUT_SEED, tools)
        print(
            f"held-out click accuracy on {args.eval_n} screens "
            f"(seed {HELD_OUT_SEED}, tools={tools}): {acc:.3f}"
        )


if __name__ == "__main__":
    main()
