// Package approvalcore holds the pure pieces of the human approval step: signed
// approval links, the decision rules and the confirm and result pages.
//
// It imports only the standard library and does no I/O of its own; the
// approve Lambda wires it to the ledger and to Step Functions.
//
// Invariants:
//
//   - The Step Functions task token never appears here. A link carries only a
//     short random approval id; the token stays in the ledger under that id.
//   - A link has the form
//     {base}/v1/approvals/{approval_id}?approver={id}&exp={unix}&kid={key id}&sig={mac}
//     where mac is the unpadded base64url HMAC-SHA256, under the key named by
//     kid, of the canonical string built by canonical: a version tag followed
//     by the length-prefixed approval id, approver, expiry and key id. Length
//     prefixes make the string unambiguous whatever the fields contain; the
//     fields are also restricted (see Sign) so they need no escaping.
//   - A link is bound to one approver and one approval and expires. Verify
//     checks shape, then key, then the MAC with hmac.Equal, then the expiry,
//     so ErrExpired is only ever reported for an authentic link.
//   - The current key signs; every listed key verifies, so keys can rotate
//     without breaking links already sent. An unlisted kid is refused.
//   - GET renders a confirm page and changes nothing; only a POST of the
//     confirm form decides. The form carries the signed parameters as hidden
//     fields, so the POST is authenticated by the same signature and needs no
//     cookie (there is no ambient credential to forge a request with).
//   - Decide is pure: it reports the truth ("already approved by X at T",
//     "expired at T") and says whether the caller must record a transition.
//     The caller records it with a conditional write (pending → decided)
//     before it calls SendTaskSuccess.
//   - Key material, signatures and task tokens never appear in errors or in
//     the String form of any value here.
package approvalcore
