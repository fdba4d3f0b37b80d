package statemachine

import (
	_ "embed"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Definition is the ASL text of the MediaBuy state machine, with its placeholders unresolved.
//
//go:embed mediabuy.asl.json
var Definition string

// The definition substitution names used in [Definition].
const (
	GovernanceFunctionARN = "GovernanceFunctionArn" // check, report, fail
	NotifyFunctionARN     = "NotifyFunctionArn"     // request (waitForTaskToken), expire
	CreateFunctionARN     = "CreateFunctionArn"     // create, cancel
	PollFunctionARN       = "PollFunctionArn"       // park (waitForTaskToken), poll
	ModifyFunctionARN     = "ModifyFunctionArn"     // check_change, update, apply, fail_change
)

// Placeholders lists every ${...} name that [Definition] uses, sorted; a deployer must supply
// exactly these (CDK DefinitionSubstitutions).
var Placeholders = []string{CreateFunctionARN, GovernanceFunctionARN, ModifyFunctionARN, NotifyFunctionARN, PollFunctionARN}

// CampaignDefinition is the ASL text of the Campaign state machine: a Map over the legs, each
// a child execution of the MediaBuy state machine, then the partial-failure policy.
//
//go:embed campaign.asl.json
var CampaignDefinition string

// CampaignFunctionARN is the campaign function's substitution name (sync_plans, close, release,
// leg, settle).
const CampaignFunctionARN = "CampaignFunctionArn"

// CampaignPlaceholders lists every ${...} name that [CampaignDefinition] uses, sorted: the
// governance function checks every leg and the notify function asks the campaign's approval.
var CampaignPlaceholders = []string{CampaignFunctionARN, CreateFunctionARN, GovernanceFunctionARN, NotifyFunctionARN}

var placeholderRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// Render returns [Definition] with every ${Name} replaced by subs[Name]. It fails when subs
// lacks a placeholder, names one that the definition does not use, or maps one to an empty
// value.
func Render(subs map[string]string) (string, error) {
	return render(Definition, Placeholders, subs)
}

// RenderCampaign is [Render] for [CampaignDefinition].
func RenderCampaign(subs map[string]string) (string, error) {
	return render(CampaignDefinition, CampaignPlaceholders, subs)
}

func render(def string, placeholders []string, subs map[string]string) (string, error) {
	var missing, extra, empty []string
	for _, p := range placeholders {
		v, ok := subs[p]
		switch {
		case !ok:
			missing = append(missing, p)
		case v == "":
			empty = append(empty, p)
		}
	}
	for k := range subs {
		if !slices.Contains(placeholders, k) {
			extra = append(extra, k)
		}
	}
	if len(missing)+len(extra)+len(empty) > 0 {
		slices.Sort(extra)
		var parts []string
		if len(missing) > 0 {
			parts = append(parts, "missing "+strings.Join(missing, ", "))
		}
		if len(empty) > 0 {
			parts = append(parts, "empty "+strings.Join(empty, ", "))
		}
		if len(extra) > 0 {
			parts = append(parts, "unknown "+strings.Join(extra, ", "))
		}
		return "", fmt.Errorf("statemachine: render substitutions: %s", strings.Join(parts, "; "))
	}
	return placeholderRE.ReplaceAllStringFunc(def, func(m string) string {
		return subs[m[2:len(m)-1]]
	}), nil
}

// Only returns the entries of subs named in names: the substitutions of one definition out of
// those of every function.
func Only(subs map[string]string, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		if v, ok := subs[n]; ok {
			out[n] = v
		}
	}
	return out
}

// Used returns the placeholder names that appear in def, sorted and without duplicates.
func Used(def string) []string {
	var out []string
	for _, m := range placeholderRE.FindAllStringSubmatch(def, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}
