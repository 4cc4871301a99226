// BuilderConfig::setDisabledTactics: the builder sees its backend through a view that does not
// offer the disabled tactics, so passes (which ask whether a kernel exists) and tactic timing
// both see the reduced set. A build-time choice only: engines are instantiated on the full
// backend, so a plan loads whatever tactics it names.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kiln {

//! Whether `pattern` selects tactic `name`: it starts the name, or is a run of whole '_'-separated
//! words in it ("onednn" selects conv_f32_onednn_blocked, "conv_fp_cudnn" every cuDNN conv engine).
bool tacticMatches(const std::string& name, const std::string& pattern);

//! `backend` without the tactics that one of `patterns` selects (`backend` itself when there are
//! none).
std::shared_ptr<Backend> withoutTactics(std::shared_ptr<Backend> backend, const std::vector<std::string>& patterns);

}  // namespace kiln
