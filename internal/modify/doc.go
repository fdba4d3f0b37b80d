// Package modify is the domain of a change to a placed media buy: a budget change (the
// total of a one-package buy, or package by package), a new end date, a pause, a resume, or a
// cancellation. It parses the buyer's request (ParsePatch, ParseCancel), decides whether the
// buy can take the change now (Admit: a buy not placed yet, a second change while one is in
// flight and anything but nothing after a cancellation are refused), and plans it (Plan): the
// exact update_media_buy arguments that governance checks with phase "modification" and the
// seller receives, and the buy's budget after the change, computed exactly.
//
// Service runs one change against the seller and governance agents and records the buy's new
// state forward-only in the ledger (revision, budget, paused/active/canceled), and moves the
// buy's own status and committed budget with it (completed, paused, canceled), the status every
// reader goes by. A success answer that shows the buy otherwise than the change asked is not
// recorded as applied: the change ends seller_contradicted with a finding, and the buy's state
// is what the seller said (contradiction.go). Its
// update_media_buy and report_plan_outcome are write-ahead intents claimed before each send
// (stage.FixIntent): a retry after an attempt that may have sent one is a resend of the same
// key and bytes, and a send that provably left nothing is released, so it stays a first send.
// As a create does, a resend first reads the buy at the seller: past the planned revision with
// the planned packages and state, the update was applied and is recorded so, nothing sent
// again. When the read cannot tell, a seller with a replay window replays the resend, and at
// one without the client refuses it before anything is sent: the change ends failed
// (BUYFLOW_NO_REPLAY_WINDOW) rather than apply twice, for a person to reconcile.
package modify
