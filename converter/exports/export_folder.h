// `iris export ARCHIVE -o DIR/`: a Hugging Face snapshot folder that transformers loads as
// the model the archive holds: sharded safetensors (model-0000i-of-0000N.safetensors and
// model.safetensors.index.json, or one model.safetensors when everything fits one shard),
// the embedded config.json with a quantization_config that says what the tensors now are,
// and every other embedded file (generation_config.json, the tokenizer files) as it was.
#pragma once

#include "common/status.h"
#include "converter/exports/export.h"

namespace iris {

// A new DIR is written beside its name and renamed into place once complete; an existing one
// (options.overwrite only) gets the export's files, each replacing only the file of its name
// (converter/exports/folder_output.h). kUnsupported for archives whose
// quantized tensors no single transformers quantization method describes (two methods at
// once, FP8 scaled per tensor or per channel).
Result<ExportReport> run_export_folder(const ExportOptions& options);

}  // namespace iris
