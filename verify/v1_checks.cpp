#include "verify/v1_checks.h"

namespace iris {

VerifyReport verify_v1_structure(const V1Archive& a) {
  VerifyReport r;
  r.path = a.path();
  // Opening the archive validated every entry (bounds, overlaps, dtype codes, sizes against
  // shapes, unique names): a tensor that is listed passed those checks.
  for (const auto& e : a.entries()) {
    TensorReport t;
    t.name = e.name;
    t.format = std::string("v1 ") + v1_dtype_name(e.dtype);
    t.checks.push_back({"structure", true, ""});
    r.tensors.push_back(std::move(t));
  }
  const auto departures = a.check_conventions();
  r.archive.push_back({"v1:layout", departures.empty(), departures.empty() ? "" : departures.front()});
  for (size_t i = 1; i < departures.size(); ++i) r.archive.push_back({"v1:layout", false, departures[i]});
  // Not a failure, but not a pass either: said in every report, so nobody reads "ok" as
  // "the weights are intact".
  r.notes.push_back(".iris v1 has no checksums: structural checks only; the tensor contents were not verified");
  return r;
}

}  // namespace iris
