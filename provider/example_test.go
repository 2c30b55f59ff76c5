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

func ExampleClassify() {
	// Cloudflare reports a used-up daily allocation as a 429, but waiting a
	// minute will not help: the internal code says so.
	body := []byte(`{"success":false,"errors":[{"code":3036,"message":"You have used up your daily free allocation of 10,000 neurons."}]}`)
	e, err := provider.Classify(provider.KindCloudflare, http.StatusTooManyRequests, http.Header{}, body)
	if err != nil {
		panic(err)
	}
	fmt.Println(e.Class, e.Code, e.Retryable(), e.Unclassified())
	// Output:
	// exhausted insufficient_quota false false
}

func ExampleNew() {
	c, err := provider.New(provider.KindAnthropic, provider.Options{APIKey: "sk-ant-..."})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%T\n", c)
	_, err = provider.New(provider.KindCloudflare, provider.Options{APIKey: "cf-token"})
	fmt.Println(err)
	// Output:
	// *provider.Anthropic
	// provider: cloudflare needs an AccountID
}
