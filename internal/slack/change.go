package slack

import (
	"strconv"
	"strings"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

// writeChange shows what a change to a placed buy changes, one line per thing that changes
// (now → after the change), and the new spend it adds. Long lists fold as a buy's packages do.
func writeChange(b *strings.Builder, c approvalcore.ChangeReview) {
	b.WriteString("*What changes* on " + escape(c.BuyID, maxFieldRunes))
	for i, l := range c.Lines {
		if i == approvalcore.MaxShownPackages {
			b.WriteString("\n• and " + strconv.Itoa(len(c.Lines)-i) + " more (see the review page)")
			break
		}
		b.WriteString("\n• " + escape(l.What, maxProductRunes) + ": " + escape(l.Before, 60) + " → " + escape(l.After, 60))
	}
	if inc := c.Increase(); inc.Minor > 0 {
		b.WriteString("\n*New spend* " + escape(inc.String(), 60))
	}
}
