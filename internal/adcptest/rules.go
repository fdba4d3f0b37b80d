package adcptest

import (
	"fmt"
	"time"
)

// The business rules the simulated seller holds a create_media_buy to, beyond the schema:
// the ones a real seller enforces and the official storyboards probe.

// minVariancePercent is the tightest billing-measurement variance this seller guarantees: a
// buyer asking for less is refused with TERMS_REJECTED, as a publisher that cannot underwrite
// it would.
const minVariancePercent = 5

// refuseCreate returns the first rule a create breaks, or nil.
func (s *Seller) refuseCreate(c *call) *AdcpError {
	if e := flightRule(c); e != nil {
		return e
	}
	if e := termsRule(c); e != nil {
		return e
	}
	return s.pricingRule(c)
}

// flightRule refuses a flight that ends before it starts ("asap" starts now).
func flightRule(c *call) *AdcpError {
	end, err := time.Parse(time.RFC3339, c.str("end_time"))
	if err != nil {
		return nil
	}
	start := c.now
	if st := c.str("start_time"); st != "" && st != "asap" {
		if start, err = time.Parse(time.RFC3339, st); err != nil {
			return nil
		}
	}
	if !end.After(start) {
		return invalid("end_time", "end_time must be after start_time")
	}
	return nil
}

// termsRule refuses measurement_terms whose billing variance is tighter than the seller
// guarantees.
func termsRule(c *call) *AdcpError {
	pkgs, _ := c.args["packages"].([]any)
	for i, p := range pkgs {
		pm, _ := p.(map[string]any)
		mt, _ := pm["measurement_terms"].(map[string]any)
		bm, _ := mt["billing_measurement"].(map[string]any)
		if v, ok := bm["max_variance_percent"].(float64); ok && v < minVariancePercent {
			return &AdcpError{Code: "TERMS_REJECTED", Recovery: "correctable",
				Message: fmt.Sprintf("this seller guarantees billing within %d%% variance, not %g%%", minVariancePercent, v),
				Field:   fmt.Sprintf("packages[%d].measurement_terms.billing_measurement.max_variance_percent", i)}
		}
	}
	return nil
}

// pricingRule refuses a package naming a listed product with a pricing option that product
// does not offer, as a seller holding a catalogue would.
func (s *Seller) pricingRule(c *call) *AdcpError {
	pkgs, _ := c.args["packages"].([]any)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range pkgs {
		pm, _ := p.(map[string]any)
		pid, _ := pm["product_id"].(string)
		prod := s.catalogueProduct(pid)
		if prod == nil {
			continue
		}
		po, _ := pm["pricing_option_id"].(string)
		ok := false
		for _, o := range prod["pricing_options"].([]any) {
			if om, _ := o.(map[string]any); om["pricing_option_id"] == po {
				ok = true
			}
		}
		if !ok {
			return &AdcpError{Code: "INVALID_REQUEST", Message: "product " + pid + " has no pricing option " + po,
				Field: fmt.Sprintf("packages[%d].pricing_option_id", i), Recovery: "correctable"}
		}
	}
	return nil
}
