// Live harness for statemachine/mediabuy.asl.json (test layer 2 in docs/ARCHITECTURE.md, with the real stage
// Lambdas): aws-local-stepfunctions 3.0.0 is the Step Functions engine, and every Task state
// calls a real Go bootstrap through a Lambda Invoke endpoint. statemachine/stagepaths starts it.
//
// Usage: node -r ./statemachine/harness/polyfill.cjs statemachine/harness/live.mjs <config.json>
//
//   config: {"lambda_url": "http://127.0.0.1:PORT",          Lambda Invoke API (2015-03-31)
//            "state_machine_arn": "arn:aws:states:…:stateMachine:MediaBuy",
//            "functions": {"GovernanceFunctionArn": "arn:aws:lambda:…:function:governance", …},
//            "retry_interval_ms": 20}                        Retry pauses (the ASL's are seconds)
//
// It listens on 127.0.0.1 (a free port) and prints {"url": "http://127.0.0.1:PORT"} as its first
// line. The URL serves:
//
//   - the Step Functions API the stage Lambdas call (AWS JSON 1.0, X-Amz-Target
//     AWSStepFunctions.*): StartExecution (submit, and the ASL's own continue-as-new task),
//     DescribeExecution, SendTaskSuccess, SendTaskFailure, SendTaskHeartbeat, with AWS's error
//     names (ExecutionAlreadyExists, TaskTimedOut, TaskDoesNotExist, InvalidToken, …);
//   - PUT /_harness/tenants/<tenant>: a JSON object merged into the `config` of every execution
//     that tenant starts (the test's timings, as a deployment's BUYFLOW_RUN_CONFIG would set);
//   - GET /_harness/executions/<name>: waits until that execution and every execution it handed
//     over to (continue-as-new) have ended, then answers their summaries, first to last:
//     [{name, status, error, cause, states, retries, invocations, leaks, input, output}].
//
// What is emulated, and how it differs from AWS:
//
//   - `lambda:invoke`: POST <lambda_url>/2015-03-31/functions/<arn>/invocations with the Payload.
//     A function error (X-Amz-Function-Error) is thrown with Error = errorType and Cause = the
//     error document as JSON, as AWS does; an invoke the service refuses (HTTP 429/5xx) is
//     thrown as Lambda.TooManyRequestsException / Lambda.ServiceException. The answer is wrapped
//     in the {StatusCode, ExecutedVersion, Payload} envelope the integration returns.
//   - `.waitForTaskToken`: every entry of the state gets a new token (AWS issues a new token per
//     entry; the emulator has none, so $$.Task.Token is a fixed marker that the handler replaces
//     in the Payload). The function is invoked, then the state waits for SendTaskSuccess/Failure
//     on that token or for its TimeoutSecondsPath to elapse (the emulator's own timer raises
//     States.Timeout); after that the token answers TaskTimedOut, after the execution ended
//     TaskDoesNotExist. Tokens are 1,100 characters long, like AWS's long ones.
//   - `states:startExecution` (continue-as-new) starts the next execution here, as StartExecution.
//   - Wait states wait in real time (the tests' intervals are 1–2 s); Retry pauses last
//     retry_interval_ms whatever the ASL says (the ASL's backoff is asserted by contract tests).
//   - No execution history API: the summary's `states` (StateEntered, in order) is the path.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { StateMachine } from 'aws-local-stepfunctions';
import { loadDefinition, namedError, stripTimeout } from './definition.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const MARKER = 'HARNESS-MARKER-TOKEN';
const TOKEN_PREFIX = 'AQC'; // every issued token starts so; the leak check looks for issued tokens
const definition = loadDefinition((name) => {
  const arn = config.functions[name];
  if (!arn) throw new Error(`live harness: no function for placeholder ${name}`);
  return arn;
});
const machine = new StateMachine(definition);

const executions = new Map(); // name → execution record
const tokens = new Map(); // token → {state: 'pending'|'done'|'timedout'|'closed', resolve, reject, execution}
const tenantConfig = new Map(); // tenant → config patch

function newToken() {
  // AWS task tokens are opaque and can exceed 1,000 characters.
  return TOKEN_PREFIX + crypto.randomBytes(824).toString('base64url');
}

// ---- Lambda ----------------------------------------------------------------------------------

async function invoke(functionArn, payload) {
  let resp;
  try {
    resp = await fetch(`${config.lambda_url}/2015-03-31/functions/${encodeURIComponent(functionArn)}/invocations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(payload),
    });
  } catch (err) {
    throw namedError('Lambda.SdkClientException', String(err));
  }
  const text = await resp.text();
  if (resp.status === 429) throw namedError('Lambda.TooManyRequestsException', text);
  if (resp.status >= 500) throw namedError('Lambda.ServiceException', text);
  if (resp.status !== 200) throw namedError('Lambda.AWSLambdaException', `HTTP ${resp.status}: ${text}`);
  if (resp.headers.get('x-amz-function-error')) {
    let doc;
    try {
      doc = JSON.parse(text);
    } catch {
      doc = { errorType: 'Lambda.Unknown', errorMessage: text };
    }
    throw namedError(doc.errorType || 'Lambda.Unknown', text);
  }
  return text === '' ? null : JSON.parse(text);
}

// ---- executions ------------------------------------------------------------------------------

function executionARN(stateMachineArn, name) {
  return `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${name}`;
}

function startExecution(stateMachineArn, name, inputText) {
  if (stateMachineArn !== config.state_machine_arn) {
    throw apiError(400, 'StateMachineDoesNotExist', `State Machine Does Not Exist: '${stateMachineArn}'`);
  }
  if (!/^[A-Za-z0-9_-]{1,80}$/.test(name ?? '')) throw apiError(400, 'InvalidName', `Invalid Name: '${name}'`);
  let input;
  try {
    input = JSON.parse(inputText ?? '{}');
  } catch {
    throw apiError(400, 'InvalidExecutionInput', 'Invalid State Machine Execution Input');
  }
  const existing = executions.get(name);
  if (existing) {
    // AWS: the same name and input while running returns the running execution.
    if (existing.status === 'RUNNING' && existing.inputText === inputText) return existing;
    throw apiError(400, 'ExecutionAlreadyExists', `Execution Already Exists: '${executionARN(stateMachineArn, name)}'`);
  }
  const patch = tenantConfig.get(input.tenant);
  const effective = patch ? { ...input, config: { ...(input.config ?? {}), ...patch } } : input;
  const ex = {
    name,
    arn: executionARN(stateMachineArn, name),
    inputText,
    input: effective,
    status: 'RUNNING',
    startDate: Date.now(),
    states: [],
    retries: {},
    invocations: [],
    leaks: [],
    next: null,
    issued: [],
  };
  ex.done = run(ex);
  executions.set(name, ex);
  return ex;
}

async function run(ex) {
  const retryIntervalOverrides = {};
  const taskResourceLocalHandlers = {};
  for (const [stateName, state] of Object.entries(definition.States)) {
    if (state.Retry) retryIntervalOverrides[stateName] = config.retry_interval_ms ?? 20;
    if (state.Type !== 'Task') continue;
    if (state.Resource.startsWith('arn:aws:states:::lambda:invoke')) {
      const callback = state.Resource.endsWith('.waitForTaskToken');
      taskResourceLocalHandlers[stateName] = (raw) => (callback ? callbackTask(ex, stateName, raw) : lambdaTask(ex, stateName, raw));
    } else if (state.Resource === 'arn:aws:states:::states:startExecution') {
      taskResourceLocalHandlers[stateName] = async (raw) => {
        const { input } = stripTimeout(raw);
        ex.invocations.push({ state: stateName, function: 'states:startExecution', action: 'startExecution' });
        const child = startExecution(input.StateMachineArn, input.Name, JSON.stringify(input.Input));
        ex.next = child.name;
        return { ExecutionArn: child.arn, StartDate: new Date(child.startDate).toISOString() };
      };
    }
  }

  const execution = machine.run(ex.input, {
    overrides: { taskResourceLocalHandlers, retryIntervalOverrides },
    context: { Task: { Token: MARKER }, Execution: { Id: ex.arn, Name: ex.name } },
  });
  const logs = (async () => {
    for await (const ev of execution.eventLogs) {
      switch (ev.type) {
        case 'StateEntered':
          ex.states.push(ev.state.name);
          if (ex.states.length > 2000) execution.abort();
          break;
        case 'StateExited':
          checkLeak(ex, `${ev.state.name} output`, ev.state.output);
          break;
        case 'StateRetried':
          ex.retries[ev.state.name] = (ex.retries[ev.state.name] ?? 0) + 1;
          break;
        case 'ExecutionSucceeded':
          ex.status = 'SUCCEEDED';
          ex.output = ev.output;
          break;
        case 'ExecutionFailed':
          ex.status = 'FAILED';
          ex.error = ev.Error;
          ex.cause = ev.Cause;
          break;
        case 'ExecutionAborted':
          ex.status = 'ABORTED';
          break;
        default:
      }
    }
  })();
  try {
    await execution.result;
  } catch (err) {
    if (ex.status === 'RUNNING') {
      ex.status = 'FAILED';
      ex.error = err.name;
      ex.cause = err.message;
    }
  }
  await logs;
  checkLeak(ex, 'execution output', ex.output);
  for (const t of ex.issued) {
    const rec = tokens.get(t);
    if (rec && rec.state === 'pending') rec.state = 'closed';
  }
}

function checkLeak(ex, where, value) {
  const text = JSON.stringify(value ?? null);
  if (text.includes(MARKER)) ex.leaks.push(`${where}: the task token marker`);
  for (const t of ex.issued) if (text.includes(t)) ex.leaks.push(`${where}: an issued task token`);
}

function record(ex, stateName, payload, extra) {
  const rec = { state: stateName, action: payload?.action ?? '', ...extra };
  ex.invocations.push(rec);
  return rec;
}

async function lambdaTask(ex, stateName, raw) {
  const { input } = stripTimeout(raw);
  const payload = input.Payload ?? {};
  const rec = record(ex, stateName, payload, { function: lastSegment(input.FunctionName) });
  if (JSON.stringify(input).includes(MARKER)) ex.leaks.push(`${stateName}: token marker in a non-callback payload`);
  try {
    const out = await invoke(input.FunctionName, payload);
    rec.result = 'ok';
    return { StatusCode: 200, ExecutedVersion: '$LATEST', Payload: out };
  } catch (err) {
    rec.result = err.name;
    throw err;
  }
}

async function callbackTask(ex, stateName, raw) {
  const { input, timeout } = stripTimeout(raw);
  const payload = { ...(input.Payload ?? {}) };
  const rec = record(ex, stateName, payload, { function: lastSegment(input.FunctionName), callback: true });
  if (payload.task_token !== MARKER) ex.leaks.push(`${stateName}: the callback payload does not carry $$.Task.Token`);
  const token = newToken();
  payload.task_token = token;
  ex.issued.push(token);
  const { promise, resolve, reject } = Promise.withResolvers();
  tokens.set(token, { state: 'pending', resolve, reject, execution: ex.name });
  // The emulator's timer raises States.Timeout after `timeout` seconds; from then on the token
  // answers TaskTimedOut, as on AWS.
  const timer = setTimeout(() => {
    const t = tokens.get(token);
    if (t.state === 'pending') {
      t.state = 'timedout';
      rec.result = 'States.Timeout';
    }
  }, (timeout ?? 60) * 1000);
  timer.unref();
  try {
    await invoke(input.FunctionName, payload);
  } catch (err) {
    clearTimeout(timer);
    tokens.get(token).state = 'closed';
    rec.result = err.name;
    throw err;
  }
  try {
    const out = await promise;
    rec.result = 'ok';
    return out;
  } catch (err) {
    rec.result = err.name;
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

function lastSegment(arn) {
  return String(arn).split(':').pop();
}

// ---- the Step Functions API ------------------------------------------------------------------

function apiError(status, type, message) {
  const err = new Error(message);
  err.status = status;
  err.type = type;
  return err;
}

function completeToken(body, ok) {
  const token = body.taskToken;
  if (typeof token !== 'string' || token.length === 0 || token.length > 2048) throw apiError(400, 'InvalidToken', 'Invalid token');
  const t = tokens.get(token);
  if (!t) throw apiError(400, token.startsWith(TOKEN_PREFIX) ? 'TaskDoesNotExist' : 'InvalidToken', 'Task does not exist anymore');
  if (t.state === 'timedout') throw apiError(400, 'TaskTimedOut', 'Task Timed Out');
  if (t.state !== 'pending') throw apiError(400, 'TaskDoesNotExist', 'Task does not exist anymore');
  t.state = 'done';
  if (ok) {
    let out;
    try {
      out = JSON.parse(body.output);
    } catch {
      t.state = 'pending';
      throw apiError(400, 'InvalidOutput', 'Invalid JSON output');
    }
    t.resolve(out);
  } else {
    t.reject(namedError(body.error ?? '', body.cause ?? ''));
  }
  return {};
}

const operations = {
  StartExecution(body) {
    const ex = startExecution(body.stateMachineArn, body.name, body.input);
    return { executionArn: ex.arn, startDate: ex.startDate / 1000 };
  },
  DescribeExecution(body) {
    const ex = [...executions.values()].find((e) => e.arn === body.executionArn);
    if (!ex) throw apiError(400, 'ExecutionDoesNotExist', `Execution Does Not Exist: '${body.executionArn}'`);
    return {
      executionArn: ex.arn,
      stateMachineArn: config.state_machine_arn,
      name: ex.name,
      status: ex.status === 'ABORTED' ? 'ABORTED' : ex.status,
      startDate: ex.startDate / 1000,
      input: ex.inputText,
    };
  },
  SendTaskSuccess: (body) => completeToken(body, true),
  SendTaskFailure: (body) => completeToken(body, false),
  SendTaskHeartbeat(body) {
    const t = tokens.get(body.taskToken);
    if (!t || t.state !== 'pending') throw apiError(400, 'TaskDoesNotExist', 'Task does not exist anymore');
    return {};
  },
};

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

function send(res, status, doc, type = 'application/json') {
  res.writeHead(status, { 'content-type': type });
  res.end(JSON.stringify(doc));
}

function summary(ex) {
  return {
    name: ex.name,
    status: ex.status,
    error: ex.error,
    cause: ex.cause,
    states: ex.states,
    retries: ex.retries,
    invocations: ex.invocations,
    leaks: ex.leaks,
    input: ex.input,
    output: ex.output,
  };
}

async function chain(name, waitMs) {
  const out = [];
  const until = Date.now() + waitMs;
  for (let next = name; next; ) {
    let ex = executions.get(next);
    while (!ex && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
      ex = executions.get(next);
    }
    if (!ex) throw apiError(404, 'ExecutionDoesNotExist', `no execution named ${next} started within the wait`);
    const left = until - Date.now();
    const finished = await Promise.race([ex.done.then(() => true), new Promise((r) => setTimeout(() => r(false), Math.max(left, 0)))]);
    if (!finished) throw apiError(504, 'StillRunning', `execution ${next} still runs: ${ex.states.join(' > ')}`);
    out.push(summary(ex));
    next = ex.next;
  }
  return out;
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://harness');
    const target = req.headers['x-amz-target'];
    if (req.method === 'POST' && typeof target === 'string' && target.startsWith('AWSStepFunctions.')) {
      const op = operations[target.slice('AWSStepFunctions.'.length)];
      if (!op) throw apiError(400, 'UnknownOperationException', `the harness does not implement ${target}`);
      const text = await readBody(req);
      send(res, 200, op(JSON.parse(text || '{}')), 'application/x-amz-json-1.0');
      return;
    }
    let m;
    if (req.method === 'PUT' && (m = url.pathname.match(/^\/_harness\/tenants\/([^/]+)$/))) {
      tenantConfig.set(decodeURIComponent(m[1]), JSON.parse(await readBody(req)));
      send(res, 200, {});
      return;
    }
    if (req.method === 'GET' && (m = url.pathname.match(/^\/_harness\/executions\/([^/]+)$/))) {
      const waitMs = Number(url.searchParams.get('wait_ms') ?? '120000');
      send(res, 200, await chain(decodeURIComponent(m[1]), waitMs));
      return;
    }
    send(res, 404, { message: `no route ${req.method} ${url.pathname}` });
  } catch (err) {
    const status = err.status ?? 500;
    send(res, status, { __type: err.type ?? 'InternalError', message: err.message }, 'application/x-amz-json-1.0');
  }
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }) + '\n');
});
process.stdin.on('end', () => process.exit(0)); // the test closes stdin to stop the harness
process.stdin.resume();
