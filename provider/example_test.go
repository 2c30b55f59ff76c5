package provider_test

import (
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/provider"
)

func ExampleClassifyOpenAI() {
	body := []byte(`{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again in 174ms.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	e := provider.ClassifyOpenAI(http.StatusTooManyRequests, http.Header{}, body)
	fmt.Println(e.Class, e.Code, e.RetryAfter, e.Retryable())
	fmt.Println(e)
	// Output:
	// throttled rate_limit_exceeded 174ms true
	// provider: throttled: rate_limit_exceeded (status 429)
}
