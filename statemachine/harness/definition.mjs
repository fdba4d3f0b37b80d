// The ASL file as both harnesses run it in aws-local-stepfunctions 3.0.0.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// functionARN is the ARN every ${Placeholder} of the ASL becomes by default: name is the
// placeholder itself, so a handler can tell the functions apart.
export const functionARN = (name) => `arn:aws:lambda:us-east-1:123456789012:function:${name}`;

// loadDefinition reads statemachine/mediabuy.asl.json, substitutes every ${Name} with
// substitute(Name) (default functionARN) and applies the emulator workaround below.
//
// aws-local-stepfunctions 3.0.0 resolves TimeoutSecondsPath against the effective input (after
// Parameters) instead of the state input as AWS does. Each such path is therefore also copied
// into Parameters (as __timeout_seconds) and the state reads it from there; this keeps the
// check that the path resolves to an integer >= 1 on the real state input. Handlers must strip
// the field (stripTimeout) before they use the input, and must not remove it from the object
// the emulator passed: it reads it again after the call.
export function loadDefinition(substitute = functionARN) {
  return prepareDefinition(renderDefinition(substitute));
}

// renderDefinition returns the text of statemachine/<file> (default mediabuy.asl.json) with
// every ${Name} replaced by substitute(Name), as the deployers render it.
export function renderDefinition(substitute = functionARN, file = 'mediabuy.asl.json') {
  return fs.readFileSync(path.join(here, '..', file), 'utf8').replace(/\$\{(\w+)\}/g, (_, name) => substitute(name));
}

// prepareDefinition parses an ASL text (placeholders already substituted, as CreateStateMachine
// receives it) and applies the workaround above.
export function prepareDefinition(text) {
  const definition = JSON.parse(text);
  for (const state of Object.values(definition.States)) {
    if (state.Type === 'Task' && state.TimeoutSecondsPath && state.Parameters) {
      state.Parameters['__timeout_seconds.$'] = state.TimeoutSecondsPath;
      state.TimeoutSecondsPath = '$.__timeout_seconds';
    }
  }
  return definition;
}

// stripTimeout returns a copy of a handler's input without the workaround's field, and the
// timeout it carried (seconds, or undefined).
export function stripTimeout(rawInput) {
  const { __timeout_seconds: timeout, ...input } = rawInput;
  return { input, timeout };
}

export function namedError(name, message) {
  const err = new Error(message ?? '');
  err.name = name;
  return err;
}
