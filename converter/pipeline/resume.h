// `iris convert --resume`: a conversion that survives being killed. It is written as
// segments -- parts of the conversion (converter/pipeline/parts.h), each at most about
// ConvertOptions::resume_every output bytes or one tensor -- committed one by one into a
// journal folder OUTPUT.resume/ beside the output, then merged into OUTPUT (byte for byte the
// archive a plain conversion writes) and the folder removed. Run again with the same source and
// options after a kill (SIGKILL included: a segment is on disk whole or not at all), it checks
// the committed segments and converts only the missing ones. With --part, the segments are cut
// from the part's run of tensors and joined into the part's own file (the bytes --part alone
// writes). A journal of another source, other options, another part or another segment size is
// refused, naming the folder.
#pragma once

#include "common/status.h"

namespace iris {

struct ConvertOptions;
struct ConvertReport;

Result<ConvertReport> run_convert_resumable(const ConvertOptions& o);

}  // namespace iris
