// What an .iris archive says of the checkpoint it was converted from: shared by the archive as
// a conversion source (Snapshot::open_archive) and by export, which writes that checkpoint back.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace iris {

class IrisArchive;

// The safetensors __metadata__ convert recorded (provenance.safetensors_metadata; untrusted:
// strings only), with "format": "pt" added when it had none, as transformers requires.
std::map<std::string, std::string> recorded_safetensors_metadata(const IrisArchive& a);

// The modules of the archive's unquantized weight matrices (2-D tensors named "*.weight"), in
// manifest order: what export's quantization_config lists as not converted, and so what a
// conversion from the archive keeps as it is unless a rule names it.
std::vector<std::string> unquantized_linear_modules(const IrisArchive& a);

}  // namespace iris
