package server

import (
	"github.com/labstack/echo/v4"
)

// registerEndpoints registers the whole API surface. Keep it in step with openapi.yaml.
func registerEndpoints(e *echo.Echo, d *Deps) {
	e.GET("/healthz", healthz)
	e.GET("/readyz", readyz(d))
	e.GET("/metrics", metricsEndpoint(d))

	// The middleware is given route by route, not to the group: a group's
	// middleware makes Echo route every unmatched /v1 path to a catch-all
	// 404, so a wrong method would answer 404 instead of 405 with Allow.
	// Routes that admit a task check the budget's room first (roomFirst),
	// before a large body is read.
	auth := []echo.MiddlewareFunc{authenticate(d.Accounts, d.authLimit)}
	admit := append(auth[:len(auth):len(auth)], roomFirst(d))
	v1 := e.Group("/v1")
	v1.POST("/tasks", createTask(d), admit...)
	v1.POST("/chat/completions", chatCompletions(d), admit...)
	antAuth := []echo.MiddlewareFunc{authenticateAnthropic(d.Accounts, d.authLimit)}
	v1.POST("/messages", createMessage(d), append(antAuth[:len(antAuth):len(antAuth)], roomFirst(d))...)
	v1.POST("/messages/count_tokens", countTokens(d), antAuth...)
	v1.POST("/embeddings", embeddings(d), admit...)
	v1.GET("/routes", listRoutes(d), auth...)
	v1.POST("/routes/:name", callRoute(d), auth...) // a route answers a budget refusal its own way (its fallback)
	v1.GET("/models", modelsList(d), auth...)
	v1.GET("/tasks", listTasks(d), auth...)
	v1.GET("/tasks/:id", getTask(d), auth...)
	v1.GET("/tasks/:id/replay", getReplay(d), auth...)
	v1.DELETE("/tasks/:id/replay", deleteReplay(d), auth...)
	v1.POST("/tasks/:id/rerun", rerunTask(d), auth...)
	v1.GET("/replays", searchReplays(d), auth...)
	v1.GET("/audit", getAudit(d), auth...)
	v1.GET("/admin/status", adminStatus(d), auth...)
	v1.GET("/owners/:owner/privacy", getPrivacy(d), auth...)
	v1.PUT("/owners/:owner/privacy", putPrivacy(d), auth...)
	v1.PUT("/owners/:owner/webhook", putWebhook(d), auth...)
	v1.GET("/owners/:owner/webhook", getWebhook(d), auth...)
	v1.DELETE("/owners/:owner/webhook", deleteWebhook(d), auth...)
	v1.POST("/owners/:owner/webhook/rotate", rotateWebhook(d), auth...)
	v1.GET("/owners/:owner/webhook/deliveries", listWebhookDeliveries(d), auth...)
	v1.POST("/tasks/:id/cancel", cancelTask(d), auth...)
	v1.GET("/usage", getUsage(d), auth...)
	v1.GET("/usage.csv", getUsageCSV(d), auth...)
	v1.GET("/budgets/:owner", getBudget(d), auth...)
	v1.PUT("/budgets/:owner", putBudget(d), auth...)
	v1.POST("/budgets/:owner/topups", postTopup(d), auth...)
	v1.POST("/keys", createKey(d), auth...)
	v1.GET("/keys", listKeys(d), auth...)
	v1.DELETE("/keys/:id", revokeKey(d), auth...)
	v1.GET("/limits", listLimits(d), auth...)
	v1.GET("/limits/:owner", getLimits(d), auth...)
	v1.PUT("/limits/:owner", putLimits(d), auth...)

	// OpenAI's Responses API (responses.go).
	v1.POST("/responses", createResponse(d), admit...)
	v1.GET("/responses/:id", getResponse(d), auth...)
	v1.POST("/responses/:id/cancel", cancelResponse(d), auth...)
	v1.DELETE("/responses/:id", deleteResponse(d), auth...)
}
