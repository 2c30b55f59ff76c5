// Package webhooks owns the signed webhooks an owner registers to hear of
// its tasks' ends instead of polling: the endpoint and its secrets, the
// outbox of events written in the transaction that finishes a task
// (QueueEvent), and their delivery by River, signed as the Standard
// Webhooks specification says (https://www.standardwebhooks.com).
//
// An event exists only if its task's finish committed, and its delivery
// job commits with it: no finished task misses its event, none is sent for
// a task that did not finish, and a process that dies between the finish
// and the delivery leaves the job for any other instance. Deliveries are
// at least once: a receiver deduplicates by the webhook-id header, which
// every attempt of one event shares.
//
// The URL is called from the server, on the server's network: one
// AddressPolicy decides what it may reach, at Put and at every address a
// delivery dials (docs/operations.md, TOLLGATE_WEBHOOK_ALLOW). An event's
// body is rendered by Config.Render, which applies the owner's privacy
// policy (tasks.Service.EventView).
//
// It is Tollgate's one outbound delivery path: the operator's budget
// alert webhook (Hook, TOLLGATE_ALERT_WEBHOOK) takes the same attempt,
// address policy, timeout and backoff, retried in process because its
// sender (budget.Alerter) keeps the alert's state.
package webhooks
