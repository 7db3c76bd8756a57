"""The Node program the `ui-tars` adapter writes into the sandbox: `@ui-tars/sdk`'s own `GUIAgent`,
unmodified, with our `Operator` over the task's computer service (the SDK's documented extension point).

Kept as a string so it travels with the Python package (written to `$HOME/ui-tars-run.cjs` per rollout).
It resolves the SDK from the pinned prefix (`OPENFORGERL_UI_TARS_PREFIX`) with `createRequire`, waits for the
screen (`GET /healthz`), then `GUIAgent.run(instruction)`. The operator maps UI-TARS actions to `POST /act`:
`start_coords` are the SDK's own pixel conversion of the model's `start_box` (0-1000 units for UI-TARS 1.0,
smart-resized pixels for 1.5); we only round them and keep them on screen. A 400 from the service is the
model's mistake: logged, the loop goes on with the unchanged screen (the SDK has no error observation).
Exit status: 0 finished/call_user, 2 loop cap, 3 the model call failed, 5 the computer service failed.
"""

DRIVER_JS = r"""'use strict';
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { createRequire } = require('node:module');

const env = process.env;
const req = createRequire(path.join(env.OPENFORGERL_UI_TARS_PREFIX, 'package.json'));
const { GUIAgent, StatusEnum } = req('@ui-tars/sdk');
const { Operator } = req('@ui-tars/sdk/core');

const COMPUTER = env.OPENFORGERL_COMPUTER_URL || 'http://127.0.0.1:8765';
const TRANSCRIPT = env.OPENFORGERL_UI_TARS_TRANSCRIPT || '';
const READY_S = Number(env.OPENFORGERL_UI_TARS_READY_S || 60);
let computerFailed = '';

// One connection per request (`agent: false`, `Connection: close`): the computer service is single-threaded,
// and a kept-alive idle connection (fetch's default) would block the next one until it times out.
function request(method, route, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? null : Buffer.from(JSON.stringify(body));
    const headers = { Connection: 'close' };
    if (data) Object.assign(headers, { 'Content-Type': 'application/json', 'Content-Length': data.length });
    const req = http.request(COMPUTER + route, { method, headers, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, ok: res.statusCode < 300, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.setTimeout(60000, () => req.destroy(new Error(`computer service: ${route} timed out`)));
    req.on('error', reject);
    if (data) req.write(data);
    req.end();
  });
}

function log(event) {
  if (TRANSCRIPT) fs.appendFileSync(TRANSCRIPT, JSON.stringify(event) + '\n');
}

async function act(body) {
  let res;
  try {
    res = await request('POST', '/act', body);
  } catch (e) {
    computerFailed = String(e);
    throw e;
  }
  const text = res.body.toString();
  if (res.status === 400) {
    log({ event: 'refused', action: body, error: text });
    return;
  }
  if (!res.ok) {
    computerFailed = `computer service answered ${res.status}`;
    throw new Error(computerFailed);
  }
  log({ event: 'action', executed: body });
}

const KEY_ALIASES = { arrowup: 'up', arrowdown: 'down', arrowleft: 'left', arrowright: 'right', esc: 'escape',
                      return: 'enter', control: 'ctrl', cmd: 'super', command: 'super', win: 'super' };
function keyCombo(spec) {
  return String(spec || '').trim().toLowerCase().split(/[\s+]+/).filter(Boolean)
    .map((k) => KEY_ALIASES[k] || k).join('+');
}

class ComputerOperator extends Operator {
  static MANUAL = {
    ACTION_SPACES: [
      "click(start_box='[x1, y1, x2, y2]')",
      "left_double(start_box='[x1, y1, x2, y2]')",
      "right_single(start_box='[x1, y1, x2, y2]')",
      "drag(start_box='[x1, y1, x2, y2]', end_box='[x3, y3, x4, y4]')",
      "hotkey(key='') # keys separated by spaces, e.g. hotkey(key='ctrl s')",
      "type(content='') #If you want to submit your input, use \"\\n\" at the end of `content`.",
      "scroll(start_box='[x1, y1, x2, y2]', direction='down or up or right or left')",
      'wait() #Sleep for 5s and take a screenshot to check for any changes.',
      'finished()',
      "call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.",
    ],
  };

  constructor(width, height) {
    super();
    this.width = width;
    this.height = height;
  }

  async screenshot() {
    let res;
    try {
      res = await request('GET', '/screenshot');
    } catch (e) {
      computerFailed = String(e);
      throw e;
    }
    if (!res.ok) {
      computerFailed = `screenshot answered ${res.status}`;
      throw new Error(computerFailed);
    }
    return { base64: res.body.toString('base64'), scaleFactor: 1 };
  }

  point(coords) {
    if (!Array.isArray(coords) || coords.length < 2 || !coords.every(Number.isFinite)) return null;
    const clamp = (v, size) => Math.min(Math.max(Math.round(v), 0), size - 1);
    return [clamp(coords[0], this.width), clamp(coords[1], this.height)];
  }

  async execute(params) {
    const p = params.parsedPrediction || {};
    const type = p.action_type;
    const inputs = p.action_inputs || {};
    const at = this.point(inputs.start_coords);
    const refuse = (why) => log({ event: 'refused', prediction: params.prediction, error: why });
    switch (type) {
      case 'click': case 'left_single': case 'left_double': case 'right_single': case 'hover': {
        if (!at) return refuse(`${type} needs start_box`);
        const action = { click: 'click', left_single: 'click', left_double: 'double_click',
                         right_single: 'right_click' }[type];
        if (!action) return refuse('hover is not supported');
        return act({ action, x: at[0], y: at[1] });
      }
      case 'drag': case 'select': {
        const to = this.point(inputs.end_coords);
        if (!at || !to) return refuse('drag needs start_box and end_box');
        return act({ action: 'drag', x: at[0], y: at[1], to_x: to[0], to_y: to[1] });
      }
      case 'type': {
        let text = String(inputs.content || '').replace(/\\n/g, '\n').replace(/\\'/g, "'").replace(/\\"/g, '"');
        const submit = text.endsWith('\n');
        if (submit) text = text.slice(0, -1);
        if (text) await act({ action: 'type', text });
        if (submit) await act({ action: 'key', keys: 'enter' });
        return;
      }
      case 'hotkey': case 'press': {
        const keys = keyCombo(inputs.key || inputs.hotkey);
        if (!keys) return refuse('hotkey needs key');
        return act({ action: 'key', keys });
      }
      case 'scroll': {
        const where = at || [Math.floor(this.width / 2), Math.floor(this.height / 2)];
        const dir = String(inputs.direction || 'down').toLowerCase();
        const d = { down: [0, 5], up: [0, -5], right: [5, 0], left: [-5, 0] }[dir];
        if (!d) return refuse(`unknown scroll direction ${dir}`);
        return act({ action: 'scroll', x: where[0], y: where[1], dx: d[0], dy: d[1] });
      }
      case 'wait':
        return act({ action: 'wait', seconds: 5 });
      case 'finished':
        return { status: StatusEnum.END };
      case 'call_user':
        return { status: StatusEnum.CALL_USER };
      default:
        return refuse(`unknown action ${JSON.stringify(type)}`);
    }
  }
}

async function waitReady() {
  const deadline = Date.now() + READY_S * 1000;
  for (;;) {
    try {
      const res = await request('GET', '/info');
      if (res.ok) return JSON.parse(res.body.toString());
    } catch (e) { /* the screen starts beside us */ }
    if (Date.now() > deadline) throw new Error(`computer service at ${COMPUTER} not ready in ${READY_S}s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main() {
  let info;
  try {
    info = await waitReady();
  } catch (e) {
    console.error(String(e));
    return 5;
  }
  let status = StatusEnum.INIT;
  let failure = null;
  const abort = new AbortController();
  const wall = Number(env.OPENFORGERL_UI_TARS_WALL_CLOCK_S || 600);
  const timer = setTimeout(() => abort.abort(), wall * 1000);
  const model = { baseURL: env.OPENAI_BASE_URL, apiKey: env.OPENAI_API_KEY, model: env.OPENFORGERL_MODEL };
  if (env.OPENFORGERL_UI_TARS_MAX_TOKENS) model.max_tokens = Number(env.OPENFORGERL_UI_TARS_MAX_TOKENS);
  const agent = new GUIAgent({
    model,
    operator: new ComputerOperator(info.width, info.height),
    signal: abort.signal,
    maxLoopCount: Number(env.OPENFORGERL_UI_TARS_MAX_LOOPS || 25),
    uiTarsVersion: env.OPENFORGERL_UI_TARS_VERSION || undefined,
    logger: { log() {}, info() {}, warn: console.warn, error() {} },
    onData: ({ data }) => {
      status = data.status;
      for (const c of data.conversations || []) {
        log({ event: 'conversation', from: c.from, value: c.screenshotBase64 ? `<image ${c.screenshotBase64.length} chars>` : c.value });
      }
    },
    onError: ({ error }) => { failure = error; },
  });
  await agent.run(env.OPENFORGERL_INSTRUCTION || process.argv[2] || '');
  clearTimeout(timer);
  log({ event: 'end', status, error: failure ? String(failure.message || failure) : null });
  if (status === StatusEnum.END || status === StatusEnum.CALL_USER) return 0;
  if (status === StatusEnum.USER_STOPPED) { console.error('[ui-tars] wall clock'); return 2; }
  const message = failure ? `${failure.status} ${failure.message}` : String(status);
  console.error(`[ui-tars] stopped: ${message}`);
  if (computerFailed) return 5;
  if (failure && failure.status === -100004) return 2;
  return 3;
}

main().then((code) => process.exit(code), (e) => { console.error(e); process.exit(3); });
"""  # noqa: E501  (the Node program, written into the sandbox as these bytes)
