// Package modification is the domain of a change to a placed media buy: a budget change (the
// total of a one-package buy, or package by package), a new end date, a pause, a resume, or a
// cancellation. It parses the buyer's request (ParsePatch, ParseCancel), decides whether the
// buy can take the change now (Admit: a buy not placed yet, a second change while one is in
// flight and anything but nothing after a cancellation are refused), and plans it (Plan): the
// exact update_media_buy arguments that governance checks with phase "modification" and the
// seller receives, and the buy's budget after the change, computed exactly.
//
// Service runs one change against the seller and governance agents and records the buy's new
// state forward-only in the ledger (revision, budget, paused/active/canceled).
package modification
