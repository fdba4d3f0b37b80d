package stages

// EventApprovalRequested exposes the notify stage's event name to the tests.
const EventApprovalRequested = eventApprovalRequested
