package campaign

import "github.com/buyflow/buyflow/internal/api"

// LinksFor returns the links of campaign id.
func LinksFor(id string) api.Links {
	return api.Links{Self: "/v1/campaigns/" + id, Events: "/v1/campaigns/" + id + "/events"}
}
