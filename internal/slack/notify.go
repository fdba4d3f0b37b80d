package slack

import (
	"context"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

// Delivery says how approval requests reach approvers.
type Delivery int

const (
	// Direct sends each approver a direct message with only their own link
	// (bot token; Review.Approver must be a Slack user id).
	Direct Delivery = iota
	// Shared posts one message with every approver's link to one channel
	// (incoming webhook). Everyone in the channel can see every link.
	Shared
)

// PostRequest posts the approval request for a and returns one Ref per
// message posted, to store with the approval for PostStatus. With Direct it
// posts one message per review to review.Approver; with Shared one message
// with all reviews. It posts every message it can and returns the errors
// of the others joined (wrapped with the approver's position, not the link).
func PostRequest(ctx context.Context, c Client, a approvalcore.Approval, reviews []Review, d Delivery) ([]Ref, error) {
	if d == Shared {
		m, err := RequestMessage(a, reviews)
		if err != nil {
			return nil, err
		}
		ref, err := c.Post(ctx, m)
		if err != nil {
			return nil, err
		}
		return []Ref{ref}, nil
	}
	if len(reviews) == 0 {
		return nil, errors.New("slack: no approvers to notify")
	}
	var refs []Ref
	var errs []error
	for i, r := range reviews {
		if !isSlackUserID(r.Approver) {
			errs = append(errs, fmt.Errorf("slack: approver %d is not a Slack user id", i+1))
			continue
		}
		m, err := RequestMessage(a, []Review{r})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.Channel = r.Approver
		ref, err := c.Post(ctx, m)
		if err != nil {
			errs = append(errs, fmt.Errorf("slack: approver %d: %w", i+1, err))
			continue
		}
		refs = append(refs, ref)
	}
	return refs, errors.Join(errs...)
}

// PostStatus tells the approvers how a ended: each message at a non-zero Ref
// is updated in place; if there are zero Refs among refs (a webhook), one
// follow-up is posted for all of them. Errors are joined.
func PostStatus(ctx context.Context, c Client, a approvalcore.Approval, refs []Ref) error {
	m, err := StatusMessage(a)
	if err != nil {
		return err
	}
	var errs []error
	followUp := false
	for _, ref := range refs {
		if ref == (Ref{}) {
			followUp = true
			continue
		}
		if _, err := c.Update(ctx, ref, m); err != nil {
			errs = append(errs, err)
		}
	}
	if followUp {
		if _, err := c.Post(ctx, m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
