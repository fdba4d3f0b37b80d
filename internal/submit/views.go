package submit

import "github.com/buyflow/buyflow/internal/buy"

// ListQuery filters and pages GET /v1/media-buys.
type ListQuery struct {
	Status string
	Seller string
	Limit  int
	Cursor string
}

// ListPage is one page of operations, newest first.
type ListPage struct {
	Items      []buy.View `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
}
