// Node 20 lacks Promise.withResolvers, which aws-local-stepfunctions 3.0.0 calls in every Task
// state. Load with `node -r ./statemachine/harness/polyfill.cjs`.
if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers() {
    let resolve, reject;
    const promise = new this((res, rej) => { resolve = res; reject = rej; });
    return { promise, resolve, reject };
  };
}
