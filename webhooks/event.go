package webhooks

import (
	"github.com/jackc/pgx/v5"
)

// Queue is the River queue deliveries run on.
const Queue = "webhooks"

// MaxAttempts is how many times an event is tried: with the default
// backoff (30 s doubling to 1 h) its attempts span more than 24 hours
// (TestScheduleSpansADay).
const MaxAttempts = 33

// queueEventSQL writes the event of task $1's end, as status $2, when its
// owner's webhook asks for it, with the River job that delivers it; for
// an owner without a webhook it writes nothing (one index lookup on an
// empty or small table). A task ends once: a second finish of it writes no
// second event.
//
// Why SQL rather than River's InsertTx: the statement is queued on the
// batch that finishes the task, sent with its COMMIT (pipetx) where a
// call to River's client, a round trip of its own, cannot go; and whether
// there is an event at all is known only inside the statement. The row
// holds what River's InsertTx would write for DeliveryArgs on Queue with
// MaxAttempts (state available, River's defaults elsewhere); River's
// producers find it by their poll.
const queueEventSQL = `
	WITH ev AS (
		INSERT INTO webhook_events (owner_id, task_id, type)
		SELECT e.owner_id, t.id, 'task.' || $2::text
		FROM tasks t JOIN webhook_endpoints e ON e.owner_id = t.owner_id
		WHERE t.id = $1 AND 'task.' || $2::text = ANY (e.events)
		ON CONFLICT (task_id, type) DO NOTHING
		RETURNING id)
	INSERT INTO river_job (args, kind, max_attempts, priority, queue, state, scheduled_at)
	SELECT jsonb_build_object('event_id', ev.id::text), 'webhook_delivery', $3, 1, $4, 'available', now()
	FROM ev`

// QueueEvent queues on b, the batch that finishes task taskID as status
// (succeeded, failed or canceled), the statement that writes its event
// and delivery job when the task's owner has a webhook for it: both
// commit, or not, with the finish.
func QueueEvent(b *pgx.Batch, taskID, status string) {
	b.Queue(queueEventSQL, taskID, status, MaxAttempts, Queue)
}
