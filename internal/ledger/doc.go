// Package ledger is buyflow's only durable state, the DynamoDB store of package record's nouns:
// one table (see [TableSchema]) holding operations, idempotency claims, locks, seller intents,
// webhook receipts, replay nonces, approvals, the reconciliation sweep's progress per seller and
// the audit timeline (whose event types are listed in internal/record/event.go, finance's
// contract).
//
// Rules that hold for every item:
//   - On an emulator, the client carries [EmulatorCompat] (single-spaced expressions,
//     prefix-free name placeholders): the same meaning on DynamoDB, and the only form kumo (the
//     local stack's and the tests' emulator) evaluates correctly. It is installed once, where the
//     client is built for an emulator endpoint.
//   - Every expression is built with feature/dynamodb/expression. Every write that can race is
//     conditional; nothing reads and then writes. A failed condition is answered from the item
//     DynamoDB returns with ReturnValuesOnConditionCheckFailure ALL_OLD, or, when it returns none
//     (kumo and dynalite never do), from a consistent read.
//   - Tenant-owned items live under pk "TENANT#<tenant>#...": a read with another tenant builds
//     another key and gets ErrNotFound, never the item. Tenant, operation, seller and approval ids
//     must be 1-256 bytes without '#' (ErrInvalidArgument), so one tenant's key can never spell
//     another's. Free-form keys (Idempotency-Key, webhook idempotency_key, nonce, PO number) are
//     stored as SHA-256 hex inside keys.
//   - Every conditional write survives a retry of itself: the SDK sends a write again when its
//     response was lost (a 200 whose body read failed), and the retry then fails its own
//     condition. Each write leaves a random id the retry recognises (last_write on transitions,
//     field updates, breakers, intents, delivery snapshots, campaign and approval creates,
//     decision_id on decisions, writer on receipts and nonces, token_cleared_by on token clears
//     and takes, the owner on claims, claimed_by on intent claims; events have random keys) and
//     then reports the success it had. An operation's create is a transaction, which the SDK
//     sends with a ClientRequestToken that DynamoDB answers idempotently on a retry; an emulator
//     that does not may answer the retry with a conflict, which its callers take as "it exists".
//   - A write that lost a race on its item is sent again before any caller sees it (conflict.go,
//     through the dynamoretry package, which the agent registry shares):
//     a TransactWriteItems cancelled only with TransactionConflict (another transaction was
//     writing one of its items), or a PutItem, UpdateItem or DeleteItem refused with
//     TransactionConflictException (a transaction was writing its item). Neither applied
//     anything, so the same request is sent again (a transaction with a new ClientRequestToken),
//     up to 8 attempts with full jitter (10 ms doubling, at most 200 ms); still lost, it is
//     ErrContention, which the HTTP routes answer 409 concurrent_write and the stages'
//     transitions return as a TransientError the state machine retries. A cancellation naming
//     ConditionalCheckFailed is never retried, whatever else it names: the condition's answer
//     is the write's meaning.
//   - What DynamoDB does here and the emulators do not. DynamoDB refuses racing writes to one
//     item (above), and only to one item: writes to other items of a partition never conflict.
//     kumo runs every write under one lock and never refuses one; moto neither, and does not
//     isolate concurrent writers either. The tests reach the retries through
//     dynamotest.StartConflicting, an endpoint in front of kumo that refuses racing writes as
//     DynamoDB does. DynamoDB answers a transaction the SDK sends again (same
//     ClientRequestToken, within ten minutes) from its first outcome without running it again;
//     kumo and moto run it again. The writes' own-retry rule above makes both answers the same.
//   - Timestamps inside sort keys use the fixed-width UTC layout 2006-01-02T15:04:05.000000000Z so
//     they sort lexically; expiries that conditions compare are numbers (Unix s or ms).
//   - ttl (Unix seconds) is the table's TTL attribute. DynamoDB deletes expired items lazily (up to
//     days late), so every condition that depends on expiry compares the expiry itself.
//
// Item types (pk / sk; condition of each write; TTL):
//
//	operation        pk TENANT#<t>#OP#<id>  sk OP
//	                 gsi1pk PENDING#<status>  gsi1sk <updated_at>#<t>#<id>   (only while pending; REMOVEd when terminal)
//	                 gsi2pk TENANT#<t>        gsi2sk <created_at>#<id>
//	                 gsi3pk <seller id>       gsi3sk <t>#<id>   (only while pending; REMOVEd when it leaves
//	                 the pending statuses; the sweep's per-seller index)
//	  create         TransactWriteItems[Put attribute_not_exists(pk), Put created event, Put
//	                 operation index]; version 1
//	  transition     TransactWriteItems[Update, Put event attribute_not_exists(pk)]; Update condition
//	                 status IN workflow.Predecessors(to) (or status = From) [AND version = :expected];
//	                 SET status, version = version + 1, updated_at, gsi1 keys or REMOVE gsi1pk, gsi1sk
//	                 (and gsi3pk, gsi3sk), changed fields. Cancellation reason ConditionalCheckFailed → *TransitionError
//	                 (terminal | illegal | version) with the current item; TransactionConflict →
//	                 ErrContention; missing → ErrNotFound
//	  advance        Advance: the transition's transaction from the operation as the caller read it;
//	                 condition status = the status read AND version = the version read AND
//	                 task_token = the token read (or attribute_not_exists(task_token)); with take
//	                 also REMOVE task_token, SET token_cleared_by. The operation it returns is the
//	                 one read with the write applied (no read-back); a refusal is a *TransitionError
//	                 classified against every predecessor of to (version: try again from Current)
//	  update fields  UpdateFields: the same transaction without a status change; condition status IN
//	                 (every pending status) [AND version = :expected]; SET version + 1, updated_at,
//	                 gsi1sk, changed fields; an "update" event
//	  task token     SetTaskToken: SET task_token if attribute_exists(pk), returns ALL_NEW;
//	                 ClearTaskToken: REMOVE task_token if task_token = :token (else ErrTokenMismatch).
//	                 The token is only in Operation, never in View (the API projection).
//	  TTL            none (kept for finance)
//
//	operation index  pk OPIDX#<id>  sk OPIDX   {tenant, operation_id, seller_id}
//	  create         Put if attribute_not_exists(pk), in the operation's create transaction: ids are
//	                 unique across tenants; LocateOperation reads it (the public webhook route names
//	                 only the operation), so the webhook can verify the seller's signature before
//	                 it reads the tenant's operation. seller_id is absent on items written before
//	                 it was kept.
//	  TTL            none
//
//	idempotency      pk TENANT#<t>#IDEM#<sha256(Idempotency-Key)>  sk IDEM
//	claim            Claim: Put if attribute_not_exists(pk) OR ttl < :now_s OR
//	                 (status = INPROGRESS AND in_progress_expiry < :now_ms), ALL_OLD on failure;
//	                 live record with another payload_hash → *PayloadMismatchError (HTTP 422), same
//	                 hash → *ClaimExistsError (COMPLETED: replay; INPROGRESS: another attempt runs)
//	                 CompleteClaim: Update SET status = COMPLETED, operation_id, response, REMOVE
//	                 in_progress_expiry if owner = :owner AND status = INPROGRESS
//	                 ReleaseClaim: Delete if owner = :owner AND status = INPROGRESS
//	  TTL            ttl = claimed + ClaimTTL (24 h); in_progress_expiry = claimed + InProgressTTL (60 s,
//	                 independent of the Lambda's remaining time)
//
//	lock / lease     pk LOCK#<name>  sk LOCK   (names: BusinessKeyLock = PO#<t>#<seller>#<sha256(po)>,
//	                 ReconcileLock = RECONCILE#<seller>, or any name)
//	  acquire        Update if attribute_not_exists(pk) OR lease_expiry < :now_ms OR owner = :owner;
//	                 SET owner, lease_expiry, lock_name, ttl ADD fence 1; returns ALL_NEW (the fence),
//	                 on failure *LockHeldError with the holder
//	  renew/release  Update if owner = :owner AND fence = :fence (else ErrLeaseLost); release sets
//	                 lease_expiry = 0 and REMOVEs owner but keeps the item, so fences keep growing
//	  TTL            ttl = lease expiry + LockRetention (7 days); after that the fence restarts at 1
//
//	seller intent    pk TENANT#<t>#OP#<id>  sk INTENT#<task>
//	  put            Put if attribute_not_exists(pk); if present, the stored intent is returned
//	                 (created = false) and the caller must reuse its bytes and idempotency_key.
//	                 A sent intent's put carries claims = 1 (the first send's claim)
//	  claim          ClaimIntent, before a send: Update SET claims = :seen + 1, claimed_by (and
//	                 from an unsent intent REMOVE unsent, SET created_at = now) if claims = :seen
//	                 (attribute_not_exists(claims) for :seen = 0) AND unsent as read; else ErrConflict
//	  release        ReleaseIntent, after a send that provably left nothing: Update SET unsent =
//	                 true if claims = :held AND attribute_not_exists(unsent); else ErrConflict
//	                 A campaign's plan intent lives on the campaign's item (plan_intent), stored
//	                 with plan_unsent = true; its claims are the same updates on plan_claims,
//	                 plan_unsent, plan_claimed_by and plan_created_at (Campaign.PlanIntentRecord)
//	  TTL            none
//
//	webhook receipt  pk RECEIPT#<sha256(seller \x00 idempotency_key)>  sk RECEIPT
//	  put            Put if attribute_not_exists(pk) OR ttl < :now_s; failure = duplicate
//	  TTL            ttl = received + ReceiptTTL (48 h default, never under 24 h)
//
//	replay nonce     pk NONCE#<sha256(key id \x00 nonce)>  sk NONCE
//	  put            Put if attribute_not_exists(pk) OR ttl < :now_s; failure = replay
//	  TTL            ttl = the signature's expiry (at least now + 1 s)
//
//	approval         pk APPROVAL#<id>  sk APPROVAL   (not tenant-keyed: links carry only the id;
//	                 the item carries tenant, and callers check it)
//	  create         Put if attribute_not_exists(pk), status pending
//	  decide         Update SET status, decider, decided_at[, comment] if status = pending, and for
//	                 approved/rejected also expires_at_ms > :now_ms; returns ALL_NEW (with the task
//	                 token, for SendTask*); on failure *DecisionError with the current record
//	  slack refs     Update SET slack_messages if attribute_exists(pk)
//	  TTL            none (kept for finance)
//
//	buy state        pk TENANT#<t>#OP#<id>  sk BUY   (a placed buy after its changes)
//	  begin change   Update SET change_id, change_kind, change_expires (unix s), the initial
//	                 state's fields if_not_exists, if attribute_not_exists(pk) OR ((no change_id
//	                 OR change_expires < :now_s) AND state <> canceled); on failure the current
//	                 state when change_id = :id (the same change begun again: no second event),
//	                 else *ChangeRefusedError with it; event in the same transaction
//	  apply change   Update SET revision, state, budget, packages, last_*; REMOVE change_* if
//	                 change_id = :id AND revision <= :rev (forward-only; ErrStaleRevision)
//	  end change     Update SET last_*; REMOVE change_* if change_id = :id (denied, rejected,
//	                 failed, expired); a second apply or end of the same change is a no-op
//	  TTL            none
//
//	delivery         pk TENANT#<t>#OP#<id>  sk DELIVERY#<as of>
//	  put            Put if attribute_not_exists(pk) OR its figures (impressions, spend,
//	                 approved, pacing) differ, ReturnValues ALL_OLD: one snapshot per reported
//	                 as-of, the same report again writes nothing, a correction replaces it;
//	                 last_write marks the put, so that its own retry reports the store
//	  read           Query begins_with(sk, "DELIVERY#"), consistent, newest first
//	  TTL            none (kept for finance)
//
//	live list        until its first delivery read, a completed operation's own gsi1 keys
//	                 LIVE / <next read>#<t>#<id>; from then on its live entry's:
//	live entry       pk TENANT#<t>#OP#<id>  sk LIVE   {tenant, id, delivery_mark, delivery_pushed,
//	                 gsi1 keys LIVE / <next read>#<t>#<id>}: a read reschedules a small item, never
//	                 the operation and its indexes
//	  hand over      ScheduleLive of a buy its operation lists: TransactWriteItems[Update op
//	                 REMOVE gsi1 keys, SET live_retired if status IN (completed, paused) AND
//	                 gsi1pk = LIVE; Update entry SET gsi1 keys, delivery_mark if_not_exists]
//	                 (a resumed buy, listed by its operation again, is handed back the same way)
//	  reschedule     Update entry SET gsi1sk[, delivery_mark] if attribute_exists(pk)
//	  retire         Delete entry if attribute_exists(pk); Update op REMOVE gsi1 keys, SET
//	                 live_retired if status IN (completed, paused) AND gsi1pk = LIVE (ErrConflict when
//	                 listed by neither)
//	  backfill       Scan (bounded per call, cursor in pk BACKFILL#LIVE sk PROGRESS, done
//	                 once the table was covered); each find: Update SET gsi1 keys LIVE if
//	                 status = completed AND no gsi1pk AND no kind AND no live_retired
//	  TTL            none
//
//	seller index     BackfillSellerIndex: Scan (bounded per call, cursor in pk BACKFILL#SELLERINDEX
//	  backfill       sk PROGRESS, done once the table was covered); each find: Update SET gsi3 keys
//	                 if attribute_not_exists(gsi3pk) AND begins_with(gsi1pk, "PENDING#")
//
//	sweep plan       pk SWEEP  sk PLAN   (SweepPlan: id, at, shards, reported, indexed)
//	  put            Put (the planner's new plan replaces the last)
//	  report         ReportShard: Update ADD reported 1 if id = :plan, returns ALL_NEW
//	  TTL            none
//
//	sweep progress   pk RECONCILE#<seller>  sk PROGRESS   (SweepProgress)
//	  put            Put if attribute_not_exists(pk) OR fence <= :fence (the sweep lease's fence),
//	                 else ErrStaleFence: a run whose lease was taken over cannot rewind a newer one
//	  TTL            none
//
//	circuit breaker  pk BREAKER#<agent id>  sk BREAKER   (Breaker; the rules: internal/breaker)
//	  put            Put if attribute_not_exists(pk) when none was read, else if version = :read;
//	                 it stores version :read + 1 and its random id in last_write (its own retry
//	                 after a lost response is success); a lost race is ErrContention: read, decide again
//	  read           GetItem, consistent; none written means closed with no failures
//	  TTL            none (deployment-wide, like the agent registry)
//
//	event            pk TENANT#<t>#OP#<id>  sk EV#<at>#<process seq>-<uuid>
//	  put            Put if attribute_not_exists(pk) (append-only; never updated or deleted);
//	                 created and transition events are written in the same transaction as the
//	                 operation change, so no transition exists without its event;
//	                 AppendEventWhile: TransactWriteItems[ConditionCheck status = :status on the
//	                 operation, the Put]: a step that depends on a status is recorded only while
//	                 the operation has it (else ErrConflict)
//	  read           Query pk = :op AND begins_with(sk, "EV#"), consistent, ascending (time order),
//	                 after a consistent read proving the operation is the tenant's
//	  TTL            none (kept for years)
//
// Listing: ListOperations queries gsi2 (newest first) with optional filters status and seller_id;
// ListPendingBySeller queries gsi3 for one seller's pending operations (gsi1's PENDING#
// partitions are read by nothing since; they tell the backfill what is pending). Cursors
// are base64url(JSON(LastEvaluatedKey)) and are refused (ErrInvalidCursor) unless every key names
// the same tenant (or listing) and only key attributes are present.
package ledger
