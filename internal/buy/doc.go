// Package buy is a media buy as buyflow's API knows it, shared by the use cases that take or
// read one: the submit request and its validation (ParseSubmit: the schema, the agents it
// names, the buy's one amount in its currency's minor units), the caller, the refusals with
// their machine-readable codes (RequestError), the API views of its records (the types are
// internal/api's), the Idempotency-Key claim (Once) and placing buys (Placer: the
// business-key lock, then the operation and the name of the execution that is to run it).
//
// Invariants:
//   - Every refusal of outside input is a *RequestError with a 4xx status; ParseSubmit writes
//     nothing, and a refused placement leaves no lock and no operation behind.
//   - A buy's operation id derives from the tenant and the Idempotency-Key (OperationID), so a
//     retry converges on the same operation, lock owner and execution.
//   - A request naming a disabled agent is valid but places nothing (Refusal).
package buy
