package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// registerEndpoints registers the whole API surface, each route with the
// dialect its errors are written in (speaks). Keep it in step with
// openapi.yaml.
func registerEndpoints(e *echo.Echo, d *Deps, speaks map[string]errorDialect) {
	e.GET("/healthz", healthz)
	e.GET("/readyz", readyz(d))
	e.GET("/metrics", metricsEndpoint(d))

	// The middleware is given route by route, not to the group: a group's
	// middleware makes Echo route every unmatched /v1 path to a catch-all
	// 404, so a wrong method would answer 404 instead of 405 with Allow.
	// Routes that admit a task check the budget's room first (roomFirst),
	// before a large body is read.
	auth := []echo.MiddlewareFunc{authenticate(d.Accounts, d.authLimit)}
	admitting := append(auth[:len(auth):len(auth)], roomFirst(d))
	antAuth := []echo.MiddlewareFunc{authenticateAnthropic(d.Accounts, d.authLimit)}
	antAdmitting := append(antAuth[:len(antAuth):len(antAuth)], roomFirst(d))
	v1 := registrar{g: e.Group("/v1"), prefix: "/v1", speaks: speaks}
	chat, messages, responses, embed := oaiChat{}, anthropicMessages{}, newOAIResponses(), newOAIEmbeddings()

	// The dialects: OpenAI's and Anthropic's APIs (dialect.go).
	v1.add(http.MethodPost, "/chat/completions", admit(d, chat), chat, admitting...)
	v1.add(http.MethodPost, "/messages", admit(d, messages), messages, antAdmitting...)
	v1.add(http.MethodPost, "/messages/count_tokens", countTokens(d), messages, antAuth...)
	v1.add(http.MethodPost, "/embeddings", admit(d, embed), embed, admitting...)
	v1.add(http.MethodGet, "/models", modelsList(d), chat, auth...)
	v1.add(http.MethodGet, "/models/:model", modelGet(d), chat, auth...)
	v1.add(http.MethodPost, "/responses", admit(d, responses), responses, admitting...)
	v1.add(http.MethodGet, "/responses/:id", getResponse(d), responses, auth...)
	v1.add(http.MethodPost, "/responses/:id/cancel", cancelResponse(d), responses, auth...)
	v1.add(http.MethodDelete, "/responses/:id", deleteResponse(d), responses, auth...)

	// Tollgate's own API, whose errors are problem documents.
	v1.add(http.MethodPost, "/tasks", createTask(d), nil, admitting...)
	v1.add(http.MethodGet, "/routes", listRoutes(d), nil, auth...)
	v1.add(http.MethodPost, "/routes/:name", callRoute(d), nil, auth...) // a route answers a budget refusal its own way (its fallback)
	v1.add(http.MethodGet, "/tasks", listTasks(d), nil, auth...)
	v1.add(http.MethodGet, "/tasks/:id", getTask(d), nil, auth...)
	v1.add(http.MethodGet, "/tasks/:id/replay", getReplay(d), nil, auth...)
	v1.add(http.MethodDelete, "/tasks/:id/replay", deleteReplay(d), nil, auth...)
	v1.add(http.MethodPost, "/tasks/:id/rerun", rerunTask(d), nil, auth...)
	v1.add(http.MethodGet, "/replays", searchReplays(d), nil, auth...)
	v1.add(http.MethodGet, "/audit", getAudit(d), nil, auth...)
	v1.add(http.MethodGet, "/admin/status", adminStatus(d), nil, auth...)
	v1.add(http.MethodGet, "/owners/:owner/privacy", getPrivacy(d), nil, auth...)
	v1.add(http.MethodPut, "/owners/:owner/privacy", putPrivacy(d), nil, auth...)
	v1.add(http.MethodPut, "/owners/:owner/webhook", putWebhook(d), nil, auth...)
	v1.add(http.MethodGet, "/owners/:owner/webhook", getWebhook(d), nil, auth...)
	v1.add(http.MethodDelete, "/owners/:owner/webhook", deleteWebhook(d), nil, auth...)
	v1.add(http.MethodPost, "/owners/:owner/webhook/rotate", rotateWebhook(d), nil, auth...)
	v1.add(http.MethodGet, "/owners/:owner/webhook/deliveries", listWebhookDeliveries(d), nil, auth...)
	v1.add(http.MethodPost, "/tasks/:id/cancel", cancelTask(d), nil, auth...)
	v1.add(http.MethodGet, "/usage", getUsage(d), nil, auth...)
	v1.add(http.MethodGet, "/usage.csv", getUsageCSV(d), nil, auth...)
	v1.add(http.MethodGet, "/budgets/:owner", getBudget(d), nil, auth...)
	v1.add(http.MethodPut, "/budgets/:owner", putBudget(d), nil, auth...)
	v1.add(http.MethodPost, "/budgets/:owner/topups", postTopup(d), nil, auth...)
	v1.add(http.MethodPost, "/keys", createKey(d), nil, auth...)
	v1.add(http.MethodGet, "/keys", listKeys(d), nil, auth...)
	v1.add(http.MethodDelete, "/keys/:id", revokeKey(d), nil, auth...)
	v1.add(http.MethodGet, "/limits", listLimits(d), nil, auth...)
	v1.add(http.MethodGet, "/limits/:owner", getLimits(d), nil, auth...)
	v1.add(http.MethodPut, "/limits/:owner", putLimits(d), nil, auth...)
}
