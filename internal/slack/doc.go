// Package slack builds the approval messages (Block Kit) and posts them to
// Slack through a small Client seam with two implementations: a bot token
// (chat.postMessage, chat.update) and an incoming webhook (post only). Sink
// is a fake Slack for tests and the local stack.
//
// Invariants:
//
//   - A message carries a per-approver review link (a signed approval link,
//     see internal/approvalcore) and never the Step Functions task token; the
//     builders only see approvalcore.Approval, which has no token.
//   - Everything that comes from a user (summary, seller, reason, comment,
//     ids) is escaped for mrkdwn (&, <, >), so it cannot mention @channel,
//     forge a link or break out of its field; it is also truncated so every
//     block stays under Slack's limits.
//   - Messages ask Slack not to unfurl links. Unfurling is harmless anyway
//     (GET of an approval link changes nothing) but it is noise.
//   - The bot token and the webhook URL are secrets: they are never logged,
//     never put in an error (transport errors are unwrapped from *url.Error,
//     which would quote the URL) and never printed by String, GoString or
//     LogValue of any value here.
//   - Links are personal. PostRequest with Direct sends each approver a
//     direct message holding only their own link; Shared (a webhook posts to
//     one channel) puts every approver's link in one message, which everyone
//     in that channel can read: use it only for a private approvers' channel.
//   - A webhook cannot edit what it posted, so WebhookClient.Update posts a
//     follow-up message instead; BotClient.Update edits in place with the
//     channel and ts returned by Post.
package slack
