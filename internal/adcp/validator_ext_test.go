package adcp_test

import (
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
)

// The internal tests validate with the real validator over both embedded releases.
func init() { adcp.SetTestValidator(adcpvalidate.NewReleasesValidator(adcpschemas.Open)) }
