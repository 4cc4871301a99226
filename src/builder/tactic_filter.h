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

//! `backend` without the tactics whose name starts with one of `prefixes` (`backend` itself when
//! there are none).
std::shared_ptr<Backend> withoutTactics(std::shared_ptr<Backend> backend, const std::vector<std::string>& prefixes);

}  // namespace kiln
