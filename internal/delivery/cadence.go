package delivery

import (
	"time"

	"github.com/buyflow/buyflow/internal/record"
)

// The flight-following cadence's defaults. Reads cost per buy (each moves the buy on the live
// list: a write of the operation and its two index copies), so a read is spent where the
// delivery says something new: at launch, when a buy that does not deliver must be seen early;
// near the end, when the last spend decides overspend; and once after the end, when sellers
// finalize. In between sellers report daily at best (most finalize a day at a time), so a read
// a day follows the delivery without paying for the hours that only repeat it.
const (
	DefaultLaunchWindow = 24 * time.Hour
	DefaultEndWindow    = 24 * time.Hour
	DefaultEdgeEvery    = 3 * time.Hour
	DefaultQuietEvery   = 24 * time.Hour
	DefaultFinalAfter   = 24 * time.Hour
	// DefaultPushWatch is how often a buy whose seller pushes its reports is pulled anyway: a
	// watchdog for a push channel gone quiet (lost deliveries, a seller that stopped).
	DefaultPushWatch = 7 * 24 * time.Hour
	// DefaultPushAlive is how recent a pushed snapshot must be for a watchdog pull to find the
	// push channel alive and skip the seller: two of the daily reports the create asks for
	// (reporting_frequency "daily"), so one late or lost report is not yet a quiet channel.
	DefaultPushAlive = 48 * time.Hour
	// DefaultSlot is the grid a flight-following read is put on: a read falls on the nearest
	// whole hour (UTC), so the buys of one seller and account due within the same hour are due
	// in the same run and share one get_media_buy_delivery. Unaligned, each buy kept the
	// minute its flight went live, nearly every read was a call of its own, and the Lambda's
	// wait on that call was the largest cost of a read after its writes.
	DefaultSlot = time.Hour
)

// Cadence decides when a live buy is next read, from its flight.
type Cadence struct {
	// Every, when set, is the operator's override: one read every Every for the whole flight,
	// whatever its phase (the run configuration's delivery_read_minutes). The read after the
	// flight's end still comes FinalAfter later and retires the buy.
	Every time.Duration
	// LaunchWindow and EndWindow are the flight's first and last stretches, read every
	// EdgeEvery; the rest of the flight is read every QuietEvery.
	LaunchWindow, EndWindow, EdgeEvery, QuietEvery time.Duration
	// FinalAfter is how long after the flight's end the last read comes: sellers finalize late
	// data and adjustments after the flight; the buy leaves the live list with that read.
	FinalAfter time.Duration
	// PushWatch is the pull cadence of a buy whose seller pushes its delivery reports.
	PushWatch time.Duration
	// PushAlive: a watchdog pull that finds a pushed snapshot written less than PushAlive ago
	// does not call the seller (DefaultPushAlive). A report that moved nothing writes no
	// snapshot, so a buy that stopped delivering is pulled at its watch as before.
	PushAlive time.Duration
	// Slot is the grid reads are put on (DefaultSlot); the operator's Every is not aligned.
	Slot time.Duration
}

func (c Cadence) withDefaults() Cadence {
	set := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	set(&c.LaunchWindow, DefaultLaunchWindow)
	set(&c.EndWindow, DefaultEndWindow)
	set(&c.EdgeEvery, DefaultEdgeEvery)
	set(&c.QuietEvery, DefaultQuietEvery)
	set(&c.FinalAfter, DefaultFinalAfter)
	set(&c.PushWatch, DefaultPushWatch)
	set(&c.PushAlive, DefaultPushAlive)
	set(&c.Slot, DefaultSlot)
	return c
}

// Next returns when a buy read at now, whose flight runs from start to end (a zero end: no end
// known), is next read; retire is true when this read was its last (the flight ended
// FinalAfter ago or more). A read is never scheduled past a phase's beginning: a buy quiet in
// mid-flight is read when its end window opens, and a buy read just before its end is read
// again FinalAfter after it.
func (c Cadence) Next(now, start, end time.Time) (next time.Time, retire bool) {
	return c.next(now, start, end, false)
}

// NextPushed is Next for a buy whose seller pushes its delivery reports: the pushes carry the
// flight, so it is pulled only every PushWatch, at its end and a final time after it (the
// operator's Every still wins).
func (c Cadence) NextPushed(now, start, end time.Time) (next time.Time, retire bool) {
	return c.next(now, start, end, true)
}

// NextPushAsked is Next for a buy whose seller was asked to push its reports (its
// capabilities offer push, so the create registered a reporting_webhook) and has pushed none
// yet: in the launch window, where Next reads every EdgeEvery, it is read once more, when the
// window closes, since its first daily report is due by then; once the window has closed with
// no push it is read as Next says (a seller that does not push after all is pulled).
func (c Cadence) NextPushAsked(now, start, end time.Time) (next time.Time, retire bool) {
	next, retire = c.next(now, start, end, false)
	if d := c.withDefaults(); d.Every <= 0 && !retire && !now.Before(start) && now.Before(start.Add(d.LaunchWindow)) {
		next = start.Add(d.LaunchWindow)
		for _, edge := range []time.Time{end.Add(-d.EndWindow), end} { // a short flight's end comes first
			if !end.IsZero() && edge.After(now) && edge.Before(next) {
				next = edge
			}
		}
	}
	return next, retire
}

// pushAlive reports whether last, a buy's newest snapshot, says its push channel is alive at
// now: a push wrote it less than PushAlive ago. The operator's Every asks for pulls: never.
func (c Cadence) pushAlive(last record.DeliverySnapshot, now time.Time) bool {
	c = c.withDefaults()
	return c.Every <= 0 && last.Pushed && now.Sub(last.ReadAt) < c.PushAlive
}

func (c Cadence) next(now, start, end time.Time, pushed bool) (next time.Time, retire bool) {
	c = c.withDefaults()
	if !end.IsZero() && !now.Before(end) {
		if !now.Before(end.Add(c.FinalAfter)) {
			return time.Time{}, true
		}
		return end.Add(c.FinalAfter), false
	}
	step := c.QuietEvery
	switch {
	case c.Every > 0:
		step = c.Every
	case pushed:
		step = c.PushWatch
	case now.Before(start):
		return start, false // nothing delivers before the flight starts
	case now.Before(start.Add(c.LaunchWindow)):
		step = c.EdgeEvery
	case !end.IsZero() && !now.Before(end.Add(-c.EndWindow)):
		step = c.EdgeEvery
	}
	next = now.Add(step)
	// To the nearest slot, not the next: a run comes a little after the slot it serves, and
	// rounding up would add a slot to every step.
	if aligned := next.Round(c.Slot); c.Every <= 0 && aligned.After(now) {
		next = aligned
	}
	var edges []time.Time // the phase boundaries a read must not skip
	if c.Every <= 0 && !pushed {
		edges = append(edges, start.Add(c.LaunchWindow))
		if !end.IsZero() {
			edges = append(edges, end.Add(-c.EndWindow))
		}
	}
	if !end.IsZero() {
		edges = append(edges, end)
	}
	for _, edge := range edges {
		if edge.After(now) && edge.Before(next) {
			next = edge
		}
	}
	return next, false
}
