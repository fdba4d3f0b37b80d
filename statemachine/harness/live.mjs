// Live Step Functions for statemachine/mediabuy.asl.json, with the real stage Lambdas behind every
// Task (test layer 2 in docs/ARCHITECTURE.md): aws-local-stepfunctions 3.0.0 is the engine, and
// every Task state calls a real Go bootstrap through a Lambda Invoke endpoint. statemachine/stagepaths (workflow tests) and
// internal/devstack (the local stack) start it.
//
// Usage: node -r ./statemachine/harness/polyfill.cjs statemachine/harness/live.mjs <config.json>
//
//   config: {"lambda_url": "http://127.0.0.1:PORT",          Lambda Invoke API (2015-03-31)
//            "state_machine_arn": "arn:aws:states:…:stateMachine:MediaBuy",   optional: the
//            "functions": {"GovernanceFunctionArn": "arn:aws:lambda:…:function:governance", …},
//                                                          ASL file, deployed at start
//            "campaign_state_machine_arn": "arn:aws:states:…:stateMachine:Campaign",  optional:
//                                                          campaign.asl.json, deployed at start
//            "retry_interval_ms": 20,                      optional: Retry pauses (default: the ASL's)
//            "max_states": 2000,                            optional: abort an execution after that many states
//            "region": "us-east-1", "account": "000000000000"}   for CreateStateMachine's ARNs
//
// It listens on 127.0.0.1 (a free port) and prints {"url": "http://127.0.0.1:PORT"} as its first
// line. The URL serves:
//
//   - the Step Functions API (AWS JSON 1.0, X-Amz-Target AWSStepFunctions.*): CreateStateMachine,
//     DescribeStateMachine, ListStateMachines, StartExecution (submit, and the ASL's own
//     continue-as-new task), DescribeExecution, ListExecutions, GetExecutionHistory,
//     StopExecution, SendTaskSuccess, SendTaskFailure, SendTaskHeartbeat, with AWS's error names
//     (ExecutionAlreadyExists, TaskTimedOut, TaskDoesNotExist, InvalidToken, …). The AWS SDKs and
//     `aws stepfunctions … --endpoint-url` work against it;
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
//     in the {StatusCode, ExecutedVersion, Payload} envelope the integration returns. A Task
//     without TimeoutSeconds has no engine timeout (the emulator's default is 60 s; AWS has
//     none): the function's own timeout, enforced by the Lambda service, bounds it.
//   - `.waitForTaskToken`: every entry of the state gets a new token (AWS issues a new token per
//     entry; the emulator has none, so $$.Task.Token is a fixed marker that the handler replaces
//     in the Payload). The function is invoked, then the state waits for SendTaskSuccess/Failure
//     on that token or for its TimeoutSecondsPath to elapse (the emulator's own timer raises
//     States.Timeout); after that the token answers TaskTimedOut, after the execution ended
//     TaskDoesNotExist. Tokens are 1,100 characters long, like AWS's long ones.
//   - `states:startExecution` (continue-as-new) starts the next execution here, as StartExecution;
//     `states:startExecution.sync:2` (a campaign's legs) starts a child and waits for its end,
//     answering its parsed output, or failing with States.TaskFailed and the child's error and
//     cause as AWS does. Tasks inside a Map state's item processor run like top-level ones.
//   - Execution history has AWS's event types (ExecutionStarted, <Type>StateEntered/Exited,
//     TaskScheduled, TaskStarted, TaskSubmitted, TaskSucceeded/Failed/TimedOut, ExecutionSucceeded/
//     Failed/Aborted) and detail fields; a retry shows as a new TaskScheduled after TaskFailed,
//     as on AWS. Parameters in TaskScheduled carry the token marker, not the issued token.
//   - Wait states and Retry pauses are real time, unless retry_interval_ms overrides the pauses.
//   - Everything is in memory and lost when the process ends; no IAM, no quotas, no Express type.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { setImmediate as nextMacrotask } from 'node:timers/promises';
import { StateMachine } from 'aws-local-stepfunctions';
import { namedError, prepareDefinition, renderDefinition, stripTimeout } from './definition.mjs';

const config = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const REGION = config.region ?? 'us-east-1';
const ACCOUNT = config.account ?? '000000000000';
const MARKER = 'HARNESS-MARKER-TOKEN';
const TOKEN_PREFIX = 'AQC'; // every issued token starts so; the leak check looks for issued tokens
// A runaway loop ends the execution (aborted) after this many states entered; AWS fails an
// execution at 25,000 history events, roughly 8,000 of this ASL's states.
const MAX_STATES = config.max_states ?? 2000;
// setTimeout's ceiling (about 24.8 days) stands for "no engine timeout" on a Task without one.
const NO_TIMEOUT_SECONDS = 2147483;

const machines = new Map(); // state machine ARN → {arn, name, text, definition, engine, roleArn, created}
const executions = new Map(); // execution ARN → execution record
const byName = new Map(); // execution name → its latest record (the /_harness routes name them)
const tokens = new Map(); // token → {state: 'pending'|'done'|'timedout'|'closed', resolve, reject, execution}
const tenantConfig = new Map(); // tenant → config patch

// eachState calls fn(name, state) for every state of a definition, the states of its Map
// states' item processors included (the engine looks handlers up by state name at any depth).
function eachState(definition, fn) {
  for (const [name, state] of Object.entries(definition.States)) {
    fn(name, state);
    const inner = state.ItemProcessor ?? state.Iterator;
    if (state.Type === 'Map' && inner) eachState(inner, fn);
  }
}

function addMachine(arn, name, text, roleArn) {
  const definition = prepareDefinition(text);
  eachState(definition, (_, state) => {
    if (state.Type === 'Task' && state.TimeoutSeconds === undefined && state.TimeoutSecondsPath === undefined) {
      state.TimeoutSeconds = NO_TIMEOUT_SECONDS;
    }
  });
  const m = { arn, name, text, definition, engine: new StateMachine(definition), roleArn, created: Date.now() };
  machines.set(arn, m);
  return m;
}

const functionFor = (name) => {
  const arn = config.functions?.[name];
  if (!arn) throw new Error(`live harness: no function for placeholder ${name}`);
  return arn;
};
if (config.state_machine_arn) {
  addMachine(config.state_machine_arn, lastSegment(config.state_machine_arn), renderDefinition(functionFor), '');
}
if (config.campaign_state_machine_arn) {
  const text = renderDefinition(functionFor, 'campaign.asl.json');
  addMachine(config.campaign_state_machine_arn, lastSegment(config.campaign_state_machine_arn), text, '');
}

function newToken() {
  // AWS task tokens are opaque and can exceed 1,000 characters.
  return TOKEN_PREFIX + crypto.randomBytes(824).toString('base64url');
}

// ---- Lambda ----------------------------------------------------------------------------------

async function invoke(functionArn, payload, machineArn) {
  let resp;
  try {
    resp = await fetch(`${config.lambda_url}/2015-03-31/functions/${encodeURIComponent(functionArn)}/invocations`, {
      method: 'POST',
      // The caller header tells the local stack's proxy that Step Functions calls: it must see
      // a function error as the Lambda API reports it (200 + X-Amz-Function-Error). The machine
      // header names the state machine whose role makes the call (the proxy may check it).
      headers: { 'content-type': 'application/json', 'x-buyflow-local-caller': 'states', 'x-buyflow-local-machine': machineArn ?? '' },
      body: JSON.stringify(payload),
    });
  } catch (err) {
    throw namedError('Lambda.SdkClientException', String(err));
  }
  const text = await resp.text();
  if (resp.status === 429) throw namedError('Lambda.TooManyRequestsException', text);
  if (resp.status === 413) throw namedError('Lambda.RequestEntityTooLargeException', text);
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

// ---- execution history -----------------------------------------------------------------------

const DETAILS = {
  ExecutionStarted: 'executionStartedEventDetails',
  ExecutionSucceeded: 'executionSucceededEventDetails',
  ExecutionFailed: 'executionFailedEventDetails',
  ExecutionAborted: 'executionAbortedEventDetails',
  ExecutionTimedOut: 'executionTimedOutEventDetails',
  TaskScheduled: 'taskScheduledEventDetails',
  TaskStarted: 'taskStartedEventDetails',
  TaskSubmitted: 'taskSubmittedEventDetails',
  TaskSucceeded: 'taskSucceededEventDetails',
  TaskFailed: 'taskFailedEventDetails',
  TaskTimedOut: 'taskTimedOutEventDetails',
};

function historyEvent(ex, type, details) {
  const id = ex.history.length + 1;
  const key = DETAILS[type] ?? (type.endsWith('StateEntered') ? 'stateEnteredEventDetails' : type.endsWith('StateExited') ? 'stateExitedEventDetails' : '');
  const ev = { timestamp: Date.now() / 1000, type, id, previousEventId: id - 1 };
  if (key) ev[key] = details ?? {};
  ex.history.push(ev);
}

const json = (v) => JSON.stringify(v ?? null);
const noTruncation = { truncated: false };

// A task attempt (one entry or one retry of a Task state) records TaskScheduled and TaskStarted
// when its handler runs, and exactly one of TaskSucceeded, TaskFailed or TaskTimedOut: from the
// handler, or from the engine's StateFailed when the engine's timer ended the attempt.
function openAttempt(ex, stateName, resourceType, resource, parameters, timeout) {
  const scheduled = { resourceType, resource, region: REGION, parameters: json(parameters) };
  if (timeout !== undefined) scheduled.timeoutInSeconds = timeout;
  historyEvent(ex, 'TaskScheduled', scheduled);
  historyEvent(ex, 'TaskStarted', { resourceType, resource });
  ex.attempt = { state: stateName, resourceType, resource, closed: false };
  return ex.attempt;
}

function endAttempt(ex, attempt, type, details) {
  if (attempt.closed) return;
  if (type !== 'TaskSubmitted') attempt.closed = true;
  historyEvent(ex, type, { resourceType: attempt.resourceType, resource: attempt.resource, ...details });
}

// ---- executions ------------------------------------------------------------------------------

function executionARN(stateMachineArn, name) {
  return `${stateMachineArn.replace(':stateMachine:', ':execution:')}:${name}`;
}

function startExecution(stateMachineArn, name, inputText) {
  const machine = machines.get(stateMachineArn);
  if (!machine) throw apiError(400, 'StateMachineDoesNotExist', `State Machine Does Not Exist: '${stateMachineArn}'`);
  name ??= crypto.randomUUID();
  if (!/^[A-Za-z0-9_-]{1,80}$/.test(name)) throw apiError(400, 'InvalidName', `Invalid Name: '${name}'`);
  inputText ??= '{}';
  let input;
  try {
    input = JSON.parse(inputText);
  } catch {
    throw apiError(400, 'InvalidExecutionInput', 'Invalid State Machine Execution Input');
  }
  const arn = executionARN(stateMachineArn, name);
  const existing = executions.get(arn);
  if (existing) {
    // AWS: the same name and input while running returns the running execution.
    if (existing.status === 'RUNNING' && existing.inputText === inputText) return existing;
    throw apiError(400, 'ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
  }
  const patch = tenantConfig.get(input?.tenant);
  const effective = patch ? { ...input, config: { ...(input.config ?? {}), ...patch } } : input;
  const ex = {
    name,
    arn,
    machine,
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
    history: [],
    attempt: null,
  };
  executions.set(arn, ex);
  byName.set(name, ex);
  ex.done = run(ex);
  return ex;
}

const stateEvent = (type) => (type === 'Task' ? 'Task' : type);

async function run(ex) {
  const retryIntervalOverrides = {};
  const taskResourceLocalHandlers = {};
  eachState(ex.machine.definition, (stateName, state) => {
    if (state.Retry && typeof config.retry_interval_ms === 'number') retryIntervalOverrides[stateName] = config.retry_interval_ms;
    if (state.Type !== 'Task') return;
    if (state.Resource.startsWith('arn:aws:states:::lambda:invoke')) {
      const callback = state.Resource.endsWith('.waitForTaskToken');
      taskResourceLocalHandlers[stateName] = (raw) => (callback ? callbackTask(ex, stateName, raw) : lambdaTask(ex, stateName, raw));
    } else if (state.Resource === 'arn:aws:states:::states:startExecution') {
      taskResourceLocalHandlers[stateName] = async (raw) => {
        await nextMacrotask();
        const { input } = stripTimeout(raw);
        ex.invocations.push({ state: stateName, function: 'states:startExecution', action: 'startExecution' });
        const attempt = openAttempt(ex, stateName, 'states', 'startExecution', input);
        try {
          const child = startExecution(input.StateMachineArn, input.Name, JSON.stringify(input.Input));
          ex.next = child.name;
          const out = { ExecutionArn: child.arn, StartDate: new Date(child.startDate).toISOString() };
          endAttempt(ex, attempt, 'TaskSucceeded', { output: json(out), outputDetails: noTruncation });
          return out;
        } catch (err) {
          const named = namedError(`StepFunctions.${err.type ?? "SfnException"}Exception`, err.message);
          endAttempt(ex, attempt, 'TaskFailed', { error: named.name, cause: named.message });
          throw named;
        }
      };
    } else if (state.Resource === 'arn:aws:states:::states:startExecution.sync:2') {
      taskResourceLocalHandlers[stateName] = (raw) => childTask(ex, stateName, raw);
    }
  });

  historyEvent(ex, 'ExecutionStarted', { input: ex.inputText, inputDetails: noTruncation, roleArn: ex.machine.roleArn });
  const execution = ex.machine.engine.run(ex.input, {
    overrides: { taskResourceLocalHandlers, retryIntervalOverrides },
    context: { Task: { Token: MARKER }, Execution: { Id: ex.arn, Name: ex.name } },
  });
  ex.handle = execution;
  const logs = (async () => {
    for await (const ev of execution.eventLogs) {
      switch (ev.type) {
        case 'StateEntered':
          ex.states.push(ev.state.name);
          historyEvent(ex, `${stateEvent(ev.state.type)}StateEntered`, { name: ev.state.name, input: json(ev.state.input), inputDetails: noTruncation });
          if (ex.states.length > MAX_STATES) execution.abort();
          break;
        case 'StateExited':
          checkLeak(ex, `${ev.state.name} output`, ev.state.output);
          historyEvent(ex, `${stateEvent(ev.state.type)}StateExited`, { name: ev.state.name, output: json(ev.state.output), outputDetails: noTruncation });
          break;
        case 'StateFailed':
          if (ev.state.type === 'Task' && ex.attempt && !ex.attempt.closed && ex.attempt.state === ev.state.name) {
            endAttempt(ex, ex.attempt, ev.Error === 'States.Timeout' ? 'TaskTimedOut' : 'TaskFailed', { error: ev.Error, cause: ev.Cause ?? '' });
          }
          break;
        case 'StateRetried':
          ex.retries[ev.state.name] = (ex.retries[ev.state.name] ?? 0) + 1;
          break;
        case 'ExecutionSucceeded':
          ex.status = 'SUCCEEDED';
          ex.output = ev.output;
          historyEvent(ex, 'ExecutionSucceeded', { output: json(ev.output), outputDetails: noTruncation });
          break;
        case 'ExecutionFailed':
          ex.status = 'FAILED';
          ex.error = ev.Error;
          ex.cause = ev.Cause;
          historyEvent(ex, 'ExecutionFailed', { error: ev.Error, cause: ev.Cause ?? '' });
          break;
        case 'ExecutionAborted':
          ex.status = 'ABORTED';
          historyEvent(ex, 'ExecutionAborted', { error: ex.stopError ?? '', cause: ex.stopCause ?? '' });
          break;
        case 'ExecutionTimeout':
          ex.status = 'TIMED_OUT';
          historyEvent(ex, 'ExecutionTimedOut', { error: 'States.Timeout', cause: '' });
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
  ex.stopDate = Date.now();
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

// Every handler first waits one macrotask: the engine calls it in the same tick in which it
// logged the state's StateEntered, and the event log is read asynchronously; after the wait the
// log has caught up, so the task's own history events follow the state's entry.

async function lambdaTask(ex, stateName, raw) {
  await nextMacrotask();
  const { input } = stripTimeout(raw);
  const payload = input.Payload ?? {};
  const rec = record(ex, stateName, payload, { function: lastSegment(input.FunctionName) });
  if (JSON.stringify(input).includes(MARKER)) ex.leaks.push(`${stateName}: token marker in a non-callback payload`);
  const attempt = openAttempt(ex, stateName, 'lambda', 'invoke', input);
  try {
    const out = await invoke(input.FunctionName, payload, ex.machine.arn);
    rec.result = 'ok';
    const envelope = { StatusCode: 200, ExecutedVersion: '$LATEST', Payload: out };
    endAttempt(ex, attempt, 'TaskSucceeded', { output: json(envelope), outputDetails: noTruncation });
    return envelope;
  } catch (err) {
    rec.result = err.name;
    endAttempt(ex, attempt, 'TaskFailed', { error: err.name, cause: err.message });
    throw err;
  }
}

async function callbackTask(ex, stateName, raw) {
  await nextMacrotask();
  const { input, timeout } = stripTimeout(raw);
  const payload = { ...(input.Payload ?? {}) };
  const rec = record(ex, stateName, payload, { function: lastSegment(input.FunctionName), callback: true });
  if (payload.task_token !== MARKER) ex.leaks.push(`${stateName}: the callback payload does not carry $$.Task.Token`);
  const attempt = openAttempt(ex, stateName, 'lambda', 'invoke.waitForTaskToken', input, timeout);
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
  }, (timeout ?? NO_TIMEOUT_SECONDS) * 1000);
  timer.unref();
  try {
    const out = await invoke(input.FunctionName, payload, ex.machine.arn);
    endAttempt(ex, attempt, 'TaskSubmitted', { output: json({ StatusCode: 200, ExecutedVersion: '$LATEST', Payload: out }), outputDetails: noTruncation });
  } catch (err) {
    clearTimeout(timer);
    tokens.get(token).state = 'closed';
    rec.result = err.name;
    endAttempt(ex, attempt, 'TaskFailed', { error: err.name, cause: err.message });
    throw err;
  }
  try {
    const out = await promise;
    rec.result = 'ok';
    endAttempt(ex, attempt, 'TaskSucceeded', { output: json(out), outputDetails: noTruncation });
    return out;
  } catch (err) {
    rec.result = err.name;
    endAttempt(ex, attempt, 'TaskFailed', { error: err.name, cause: err.message });
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

// childTask runs a child execution to its end (StartExecution.sync:2): its output, parsed, on
// success; States.TaskFailed with the child's error and cause otherwise, as AWS reports it. A
// child already running under that name and input is the one waited for (AWS's idempotent
// StartExecution).
async function childTask(ex, stateName, raw) {
  await nextMacrotask();
  const { input } = stripTimeout(raw);
  ex.invocations.push({ state: stateName, function: 'states:startExecution.sync:2', action: 'startExecution' });
  const attempt = openAttempt(ex, stateName, 'states', 'startExecution.sync:2', input);
  let child;
  try {
    child = startExecution(input.StateMachineArn, input.Name, JSON.stringify(input.Input));
  } catch (err) {
    const named = namedError(`StepFunctions.${err.type ?? 'SfnException'}Exception`, err.message);
    endAttempt(ex, attempt, 'TaskFailed', { error: named.name, cause: named.message });
    throw named;
  }
  endAttempt(ex, attempt, 'TaskSubmitted', { output: json({ ExecutionArn: child.arn }), outputDetails: noTruncation });
  await child.done;
  const out = { ExecutionArn: child.arn, Name: child.name, Status: child.status, StartDate: child.startDate, StopDate: child.stopDate, Input: child.input };
  if (child.status === 'SUCCEEDED') {
    out.Output = child.output;
    endAttempt(ex, attempt, 'TaskSucceeded', { output: json(out), outputDetails: noTruncation });
    return out;
  }
  const cause = JSON.stringify({ ...out, Error: child.error ?? child.stopError, Cause: child.cause ?? child.stopCause });
  endAttempt(ex, attempt, 'TaskFailed', { error: 'States.TaskFailed', cause });
  throw namedError('States.TaskFailed', cause);
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

function findExecution(arn) {
  const ex = executions.get(arn);
  if (!ex) throw apiError(400, 'ExecutionDoesNotExist', `Execution Does Not Exist: '${arn}'`);
  return ex;
}

function findMachine(arn) {
  const m = machines.get(arn);
  if (!m) throw apiError(400, 'StateMachineDoesNotExist', `State Machine Does Not Exist: '${arn}'`);
  return m;
}

function executionListItem(ex) {
  const item = { executionArn: ex.arn, stateMachineArn: ex.machine.arn, name: ex.name, status: ex.status, startDate: ex.startDate / 1000 };
  if (ex.stopDate) item.stopDate = ex.stopDate / 1000;
  return item;
}

// page returns items[offset, offset+max) and the next token (the next offset) for the AWS
// list operations' maxResults/nextToken paging.
function page(items, maxResults, nextToken) {
  const max = maxResults > 0 ? Math.min(maxResults, 1000) : 1000;
  const offset = nextToken ? Number.parseInt(nextToken, 10) : 0;
  if (!Number.isInteger(offset) || offset < 0 || offset > items.length) throw apiError(400, 'InvalidToken', 'Invalid nextToken');
  const slice = items.slice(offset, offset + max);
  return { slice, next: offset + max < items.length ? String(offset + max) : undefined };
}

const operations = {
  CreateStateMachine(body) {
    const name = body.name ?? '';
    if (!/^[A-Za-z0-9_-]{1,80}$/.test(name)) throw apiError(400, 'InvalidName', `Invalid Name: '${name}'`);
    if (body.type && body.type !== 'STANDARD') throw apiError(400, 'ValidationException', 'only STANDARD state machines are emulated');
    const arn = `arn:aws:states:${REGION}:${ACCOUNT}:stateMachine:${name}`;
    const existing = machines.get(arn);
    if (existing) {
      if (existing.text === body.definition && existing.roleArn === body.roleArn) return { stateMachineArn: arn, creationDate: existing.created / 1000 };
      throw apiError(400, 'StateMachineAlreadyExists', `State Machine Already Exists: '${arn}'`);
    }
    let m;
    try {
      m = addMachine(arn, name, body.definition ?? '', body.roleArn ?? '');
    } catch (err) {
      throw apiError(400, 'InvalidDefinition', `Invalid State Machine Definition: '${err.message}'`);
    }
    return { stateMachineArn: m.arn, creationDate: m.created / 1000 };
  },
  DescribeStateMachine(body) {
    const m = findMachine(body.stateMachineArn);
    return { stateMachineArn: m.arn, name: m.name, status: 'ACTIVE', definition: m.text, roleArn: m.roleArn, type: 'STANDARD', creationDate: m.created / 1000 };
  },
  ListStateMachines(body) {
    const all = [...machines.values()].map((m) => ({ stateMachineArn: m.arn, name: m.name, type: 'STANDARD', creationDate: m.created / 1000 }));
    const { slice, next } = page(all, body.maxResults, body.nextToken);
    return { stateMachines: slice, nextToken: next };
  },
  StartExecution(body) {
    const ex = startExecution(body.stateMachineArn, body.name, body.input);
    return { executionArn: ex.arn, startDate: ex.startDate / 1000 };
  },
  DescribeExecution(body) {
    const ex = findExecution(body.executionArn);
    const out = { ...executionListItem(ex), input: ex.inputText, inputDetails: { included: true } };
    if (ex.status === 'SUCCEEDED') Object.assign(out, { output: json(ex.output), outputDetails: { included: true } });
    if (ex.status === 'FAILED' || ex.status === 'ABORTED') Object.assign(out, { error: ex.error ?? ex.stopError, cause: ex.cause ?? ex.stopCause });
    return out;
  },
  ListExecutions(body) {
    findMachine(body.stateMachineArn);
    const all = [...executions.values()]
      .filter((ex) => ex.machine.arn === body.stateMachineArn && (!body.statusFilter || ex.status === body.statusFilter))
      .sort((a, b) => b.startDate - a.startDate)
      .map(executionListItem);
    const { slice, next } = page(all, body.maxResults, body.nextToken);
    return { executions: slice, nextToken: next };
  },
  GetExecutionHistory(body) {
    const ex = findExecution(body.executionArn);
    let events = ex.history.map((ev) => ({ ...ev }));
    if (body.reverseOrder) events.reverse();
    if (body.includeExecutionData === false) {
      for (const ev of events) for (const k of Object.keys(ev)) if (k.endsWith('EventDetails')) for (const f of ['input', 'output', 'parameters']) delete ev[k][f];
    }
    const { slice, next } = page(events, body.maxResults, body.nextToken);
    return { events: slice, nextToken: next };
  },
  StopExecution(body) {
    const ex = findExecution(body.executionArn);
    if (ex.status !== 'RUNNING') throw apiError(400, 'ExecutionNotRunning', `Execution is not running: '${ex.arn}'`);
    ex.stopError = body.error;
    ex.stopCause = body.cause;
    ex.handle.abort();
    return { stopDate: Date.now() / 1000 };
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
  res.writeHead(status, { 'content-type': type, 'x-amzn-requestid': crypto.randomUUID() });
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
    let ex = byName.get(next);
    while (!ex && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
      ex = byName.get(next);
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
      if (!op) throw apiError(400, 'UnknownOperationException', `the local Step Functions does not implement ${target}`);
      const text = await readBody(req);
      let body;
      try {
        body = JSON.parse(text || '{}');
      } catch {
        throw apiError(400, 'SerializationException', 'the request body is not JSON');
      }
      send(res, 200, op(body ?? {}), 'application/x-amz-json-1.0');
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
process.stdin.on('end', () => process.exit(0)); // the parent closes stdin to stop the harness
process.stdin.resume();
