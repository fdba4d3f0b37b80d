package submit

// ListQuery filters and pages GET /v1/media-buys.
type ListQuery struct {
	Status string
	Seller string
	Limit  int
	Cursor string
}
