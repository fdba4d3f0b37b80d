// Package create is the create function's use case (Service): CreateMediaBuy (the write-ahead
// create_media_buy, a lapsed claim reconciled with get_media_buys, a lapsed approval
// re-checked before spend) and Compensate/CancelAfterDeadline (update_media_buy canceled).
// What it shares with the governance and poll stages, and the invariants all three keep, are
// in internal/stage.
package create
