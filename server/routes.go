package server

import (
	"github.com/labstack/echo/v4"
)

// registerRoutes registers the whole API surface. Keep it in step with openapi.yaml.
func registerRoutes(e *echo.Echo, d *Deps) {
	e.GET("/healthz", healthz)
	e.GET("/readyz", readyz(d))
	e.GET("/metrics", metricsEndpoint(d))

	v1 := e.Group("/v1", authenticate(d.Accounts, d.authLimit))
	v1.POST("/tasks", createTask(d))
	v1.POST("/chat/completions", chatCompletions(d))
	v1.POST("/routes/:name", callRoute(d))
	v1.GET("/models", modelsList(d))
	v1.GET("/tasks", listTasks(d))
	v1.GET("/tasks/:id", getTask(d))
	v1.GET("/tasks/:id/replay", getReplay(d))
	v1.DELETE("/tasks/:id/replay", deleteReplay(d))
	v1.POST("/tasks/:id/rerun", rerunTask(d))
	v1.GET("/replays", searchReplays(d))
	v1.GET("/audit", getAudit(d))
	v1.GET("/admin/status", adminStatus(d))
	v1.GET("/owners/:owner/privacy", getPrivacy(d))
	v1.PUT("/owners/:owner/privacy", putPrivacy(d))
	v1.POST("/tasks/:id/cancel", cancelTask(d))
	v1.GET("/usage", getUsage(d))
	v1.GET("/usage.csv", getUsageCSV(d))
	v1.GET("/budgets/:owner", getBudget(d))
	v1.PUT("/budgets/:owner", putBudget(d))
	v1.POST("/budgets/:owner/topups", postTopup(d))
}
