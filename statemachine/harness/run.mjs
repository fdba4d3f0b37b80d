// Path-test harness for statemachine/mediabuy.asl.json (test layer 2 in docs/ARCHITECTURE.md).
//
// Usage: node -r ./statemachine/harness/polyfill.cjs statemachine/harness/run.mjs <scenario.json>...
//
// It runs the ASL file in aws-local-stepfunctions 3.0.0 and answers every Task state from the
// scenario instead of AWS:
//
//   {
//     "input":   { ...workflow.ExecutionInput... },
//     "results": { "<action>": [ {"output": {...}} | {"error": "TransientError", "cause": "..."} | {"timeout": true}, ... ],
//                  "startExecution": [ ... same shapes ... ] }
//   }
//
// An action is the Payload's "action" (check, report, fail, request, expire, create, cancel,
// park, poll); each call takes the next entry of its list. A plain lambda:invoke answer is
// wrapped in the {StatusCode, Payload} envelope the integration returns (the emulator does not
// know lambda:invoke). `.waitForTaskToken` states are emulated: their handler resolves with the
// entry's output (SendTaskSuccess), throws its error (SendTaskFailure, or a failed invoke), or
// throws States.Timeout (the TimeoutSecondsPath elapsing). Wait states and Retry pauses are
// overridden to 0 ms. $$.Task.Token is mocked through the Context object.
//
// It prints one JSON summary: {status, error, cause, states (entered, in order), calls (per
// action), retries (per state), payloads, leaks, exhausted, unused (entries left per action),
// output}.
//
// live.mjs runs the same ASL with the real Go bootstraps behind every Task instead
// (statemachine/stagepaths).
import fs from 'node:fs';
import { StateMachine } from 'aws-local-stepfunctions';
import { loadDefinition, namedError as named, stripTimeout } from './definition.mjs';

const TOKEN = 'TASK-TOKEN-6f1c0e2a-never-in-state';
const definition = loadDefinition();

async function runScenario(scenario) {
  const calls = {};
  const payloads = [];
  const leaks = [];
  const exhausted = [];
  const queues = structuredClone(scenario.results ?? {});

  function next(action, state) {
    calls[action] = (calls[action] ?? 0) + 1;
    const q = queues[action];
    if (!q || q.length === 0) {
      exhausted.push(`${state}:${action}`);
      throw named('ScenarioExhausted', `no scenario result left for action ${action} in ${state}`);
    }
    return q.shift();
  }

  function answer(entry) {
    if (entry.timeout) throw named('States.Timeout', 'the task timed out');
    if (entry.error) throw named(entry.error, entry.cause ?? '');
    return entry.output ?? {};
  }

  const taskResourceLocalHandlers = {};
  const retryIntervalOverrides = {};
  const waitTimeOverrides = {};
  for (const [name, state] of Object.entries(definition.States)) {
    if (state.Retry) retryIntervalOverrides[name] = 0;
    if (state.Type === 'Wait') waitTimeOverrides[name] = 0;
    if (state.Type !== 'Task') continue;
    const resource = state.Resource;
    if (resource.startsWith('arn:aws:states:::lambda:invoke')) {
      const callback = resource.endsWith('.waitForTaskToken');
      taskResourceLocalHandlers[name] = async (rawInput) => {
        const { input } = stripTimeout(rawInput);
        const payload = input.Payload ?? {};
        const action = payload.action ?? '(none)';
        payloads.push({ state: name, action, function: String(input.FunctionName).split(':').pop(), payload });
        if (!callback && JSON.stringify(input).includes(TOKEN)) leaks.push(`${name}: token in a non-callback payload`);
        if (callback && payload.task_token !== TOKEN) leaks.push(`${name}: callback payload lacks the task token`);
        const out = answer(next(action, name));
        return callback ? out : { StatusCode: 200, ExecutedVersion: '$LATEST', Payload: out };
      };
    } else if (resource.startsWith('arn:aws:states:::states:startExecution')) {
      taskResourceLocalHandlers[name] = async (input) => {
        payloads.push({ state: name, action: 'startExecution', payload: input });
        const q = queues.startExecution;
        if (q && q.length > 0) {
          calls.startExecution = (calls.startExecution ?? 0) + 1;
          const out = answer(q.shift());
          if (Object.keys(out).length > 0) return out;
        } else {
          calls.startExecution = (calls.startExecution ?? 0) + 1;
        }
        return {
          ExecutionArn: `${String(input.StateMachineArn).replace(':stateMachine:', ':execution:')}:${input.Name}`,
          StartDate: new Date(0).toISOString(),
        };
      };
    }
  }

  const machine = new StateMachine(definition);
  const execution = machine.run(scenario.input, {
    overrides: { taskResourceLocalHandlers, retryIntervalOverrides, waitTimeOverrides },
    context: { Task: { Token: TOKEN } },
  });

  const states = [];
  const retries = {};
  let status = 'RUNNING';
  let error;
  let cause;
  let output;
  const maxStates = scenario.max_states ?? 500;

  const logs = (async () => {
    for await (const ev of execution.eventLogs) {
      switch (ev.type) {
        case 'StateEntered':
          states.push(ev.state.name);
          if (states.length > maxStates) execution.abort();
          break;
        case 'StateExited':
          if (JSON.stringify(ev.state.output ?? null).includes(TOKEN)) leaks.push(`${ev.state.name}: token in state output`);
          break;
        case 'StateRetried':
          retries[ev.state.name] = (retries[ev.state.name] ?? 0) + 1;
          break;
        case 'ExecutionSucceeded':
          status = 'SUCCEEDED';
          output = ev.output;
          break;
        case 'ExecutionFailed':
          status = 'FAILED';
          error = ev.Error;
          cause = ev.Cause;
          break;
        case 'ExecutionAborted':
          status = 'ABORTED';
          break;
        default:
      }
    }
  })();

  try {
    await execution.result;
  } catch (err) {
    if (status === 'RUNNING') {
      status = 'FAILED';
      error = err.name;
      cause = err.message;
    }
  }
  await logs;
  if (JSON.stringify(output ?? null).includes(TOKEN)) leaks.push('execution output contains the token');
  // Scenario entries never consumed: the execution took another path than the scenario planned.
  const unused = {};
  for (const [action, q] of Object.entries(queues)) if (q.length > 0) unused[action] = q.length;

  return { status, error, cause, states, calls, retries, payloads, leaks, exhausted, unused, output };
}

// One scenario file prints one summary object; several print a JSON array of summaries, in
// order (one Node start for a whole test table: loading the emulator takes seconds here).
const files = process.argv.slice(2);
if (files.length === 0) {
  process.stderr.write('usage: node -r ./statemachine/harness/polyfill.cjs statemachine/harness/run.mjs <scenario.json>...\n');
  process.exit(2);
}
const summaries = [];
for (const file of files) {
  const started = Date.now();
  const summary = await runScenario(JSON.parse(fs.readFileSync(file, 'utf8')));
  summary.elapsed_ms = Date.now() - started;
  summaries.push(summary);
}
process.stdout.write(JSON.stringify(files.length === 1 ? summaries[0] : summaries, null, 2) + '\n');
