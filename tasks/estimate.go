package tasks

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/catalog"
)

// Estimate is what admitting a request would reserve, figured as Create
// figures it.
type Estimate struct {
	// InputTokens is the prompt estimate on the model that would run the
	// request (estimateInput, images by its provider kind).
	InputTokens int64
	// ReservedMicros is the reservation: the most expensive model of the
	// chain that can take the request, at its output limit.
	ReservedMicros int64
}

// Estimate returns what Create would reserve for req, reading and writing
// nothing. It fails as Create does before it reads anything: a
// *ValidationError for an invalid request or an unknown model, a
// *RefusedError for one no model of the chain can take.
func (s *Service) Estimate(req Request) (Estimate, error) {
	return s.intake.estimate(req)
}

// estimate carries out Service.Estimate.
func (s *intake) estimate(req Request) (Estimate, error) {
	if err := req.Validate(); err != nil {
		return Estimate{}, err
	}
	fitting, priced, err := s.fittingModels(req)
	if err != nil {
		return Estimate{}, err
	}
	amount, _ := s.fitting.estimate(fitting, priced, req)
	return Estimate{InputTokens: s.fitting.inputTokens(fitting[0], req.Chat), ReservedMicros: amount}, nil
}

// InputTokens is the prompt estimate of req on the model it names, the
// figure its reservation starts from (estimateInput). Unlike Estimate it
// does not ask whether the model can take the request: a prompt is
// counted whether or not it fits. It returns a *ValidationError for an
// invalid request or an unknown model.
func (s *Service) InputTokens(req Request) (int64, error) {
	if err := req.Validate(); err != nil {
		return 0, err
	}
	m, _, err := s.cfg.Catalog.Resolve(req.Model)
	if errors.Is(err, catalog.ErrUnknownModel) {
		return 0, unknownModel(err)
	}
	if err != nil {
		return 0, err
	}
	return s.fitting.inputTokens(m, req.Chat), nil
}

// unknownModel is the refusal of a model name the catalog (and its price
// list) does not have, naming the close matches it knows, if any.
func unknownModel(err error) *ValidationError {
	msg := "is not a model this service offers"
	var unknown *catalog.UnknownModelError
	if errors.As(err, &unknown) && len(unknown.Suggestions) > 0 {
		quoted := make([]string, len(unknown.Suggestions))
		for i, s := range unknown.Suggestions {
			quoted[i] = strconv.Quote(s)
		}
		last := len(quoted) - 1
		alts := quoted[last]
		if last > 0 {
			alts = strings.Join(quoted[:last], ", ") + " or " + alts
		}
		msg += "; did you mean " + alts
	}
	return &ValidationError{Fields: []FieldError{{"model", msg}}}
}
