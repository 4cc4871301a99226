// Dynamic shapes: the strided Attention views (ops/attention_views.h) of a network whose dims
// change with its inputs, as expressions of the Attention layer's input dims (kiln_view_exprs).
// The views are traced at each sample shape of the profiles (symbolic_dims.h); each value gets
// the simplest expression that gives it at every sample: a constant, or a constant times a
// product of neighbouring dims of the Q, K or V buffer (the output's dims for its strides). The
// samples move every input dim on its own, so an expression that fits them all is the shape
// arithmetic of the data movement; the layer checks the resolved views again at every shape.
#pragma once
#include <array>
#include <vector>

#include "ops/attention_views.h"

namespace kiln {

//! `views[s]`: the views at sample s; `refs[s]`: the Q, K and V buffers' dims and the output's dims
//! there. Fills `exprs` (kViewExprInts per value of viewValues) and returns true when every value
//! fits one expression at all samples (at least two samples; the same output view rank at each).
bool fitViewExprs(const std::vector<QkvViews>& views, const std::vector<std::array<Dims, 4>>& refs, std::vector<int64_t>& exprs);

//! The views as stored beside their expressions: the values the expressions make constant, -1 for
//! the others.
QkvViews constantViewValues(const QkvViews& first, const std::vector<int64_t>& exprs);

}  // namespace kiln
