"""Bounding-box ops of ``tf.image``: non-max suppression, crop_and_resize, drawing, sampling crops.

Boxes are ``[y_min, x_min, y_max, x_max]``; ``crop_and_resize``, ``draw_bounding_boxes`` and
``sample_distorted_bounding_box`` take them normalised to ``[0, 1]``.
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.image.checks import as_image

_F = np.float32


def _iou(boxes: np.ndarray, i: int, j: int) -> float:
    """TensorFlow's IoU: corners in any order; a box of no area overlaps nothing."""
    a, b = boxes[i], boxes[j]
    ymin_i, ymax_i = min(a[0], a[2]), max(a[0], a[2])
    xmin_i, xmax_i = min(a[1], a[3]), max(a[1], a[3])
    ymin_j, ymax_j = min(b[0], b[2]), max(b[0], b[2])
    xmin_j, xmax_j = min(b[1], b[3]), max(b[1], b[3])
    area_i = _F((ymax_i - ymin_i) * (xmax_i - xmin_i))
    area_j = _F((ymax_j - ymin_j) * (xmax_j - xmin_j))
    if area_i <= 0 or area_j <= 0:
        return 0.0
    ih = max(_F(min(ymax_i, ymax_j) - max(ymin_i, ymin_j)), _F(0))
    iw = max(_F(min(xmax_i, xmax_j) - max(xmin_i, xmin_j)), _F(0))
    inter = _F(ih * iw)
    return float(_F(inter / _F(area_i + area_j - inter)))


def _check_nms(boxes: Any, scores: Any, max_output_size: Any, api: str) -> tuple[np.ndarray, np.ndarray, int]:
    b = np.asarray(boxes, _F)
    s = np.asarray(scores, _F)
    if b.ndim != 2 or b.shape[-1] != 4:
        raise InvalidArgumentError(
            f"boxes must be 2-D with shape [num_boxes, 4]; received shape {tuple(b.shape)}\n"
            f"{api}: Fix: pass one [y1, x1, y2, x2] row per box.")
    if s.shape != (b.shape[0],):
        raise InvalidArgumentError(
            f"scores has incompatible shape {tuple(s.shape)} (boxes: {tuple(b.shape)})\n"
            f"{api}: Fix: pass one score per box, shape [num_boxes].")
    size = int(np.asarray(max_output_size))
    if size < 0:
        raise InvalidArgumentError(f"max_output_size must be non-negative; received {size}\n"
                                   f"{api}: Fix: pass the most boxes to keep (>= 0).")
    return b, s, size


def _nms(boxes: np.ndarray | None, scores: np.ndarray, size: int, iou_threshold: float,
         score_threshold: float, soft_nms_sigma: float,
         overlaps: np.ndarray | None = None) -> tuple[list[int], list[float]]:
    """Greedy (soft) NMS in TensorFlow's order: highest score first, ties by lower index.

    The similarity of two boxes is their IoU, or ``overlaps[i, j]`` when that matrix is given.
    """
    threshold = _F(iou_threshold)
    floor = _F(score_threshold)
    scale = _F(-0.5 / soft_nms_sigma) if soft_nms_sigma > 0 else _F(0)
    # Heap entries: (-score, index, suppress_begin).
    heap = [(-float(scores[i]), i, 0) for i in range(len(scores)) if scores[i] > floor]
    heapq.heapify(heap)
    selected: list[int] = []
    selected_scores: list[float] = []
    while len(selected) < size and heap:
        neg, index, begin = heapq.heappop(heap)
        original = _F(-neg)
        score = original
        hard = False
        for j in range(len(selected) - 1, begin - 1, -1):
            iou = (_F(overlaps[index, selected[j]]) if overlaps is not None
                   else _F(_iou(boxes, index, selected[j])))  # type: ignore[arg-type]
            weight = _F(math.exp(scale * iou * iou)) if iou <= threshold else _F(0)
            score = _F(score * weight)
            if soft_nms_sigma <= 0 and iou > threshold:
                hard = True
                break
            if score <= floor:
                break
        if hard:
            continue
        if score == original:
            selected.append(index)
            selected_scores.append(float(score))
        elif score > floor:
            heapq.heappush(heap, (-float(score), index, len(selected)))
    return selected, selected_scores


def non_max_suppression(boxes: Any, scores: Any, max_output_size: int, iou_threshold: float = 0.5,
                        score_threshold: float = float("-inf"), name: str | None = None) -> np.ndarray:
    """Greedily keeps high-scoring boxes that overlap kept ones by at most ``iou_threshold``
    (``tf.image.non_max_suppression``).

    Args:
      boxes: ``[num_boxes, 4]`` float, ``[y1, x1, y2, x2]`` (corners in either order).
      scores: ``[num_boxes]``.
      max_output_size: the most indices to return.
      iou_threshold: a box whose IoU with a kept box exceeds this is dropped.
      score_threshold: boxes scoring at or below this are never kept.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      int32 ``[M]`` indices into ``boxes``, by descending score (ties: lower index first).
    """
    del name
    b, s, size = _check_nms(boxes, scores, max_output_size, "tps.image.non_max_suppression")
    _check_iou(iou_threshold, "tps.image.non_max_suppression")
    return np.array(_nms(b, s, size, iou_threshold, score_threshold, 0.0)[0], np.int32)


def non_max_suppression_overlaps(overlaps: Any, scores: Any, max_output_size: int,
                                 overlap_threshold: float = 0.5, score_threshold: float = float("-inf"),
                                 name: str | None = None) -> np.ndarray:
    """Greedy NMS on a given overlap matrix (``tf.image.non_max_suppression_overlaps``).

    Args:
      overlaps: ``[num_boxes, num_boxes]`` float similarities.
      scores: ``[num_boxes]``.
      max_output_size: the most indices to return.
      overlap_threshold: a box whose overlap with a kept box exceeds this is dropped.
      score_threshold: boxes scoring at or below this are never kept.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      int32 ``[M]`` indices, by descending score.
    """
    del name
    api = "tps.image.non_max_suppression_overlaps"
    o = np.asarray(overlaps, _F)
    s = np.asarray(scores, _F)
    if o.ndim != 2 or o.shape[0] != o.shape[1] or s.shape != (o.shape[0],):
        raise InvalidArgumentError(
            f"overlaps must be square [num_boxes, num_boxes] and scores [num_boxes]; received "
            f"{tuple(o.shape)} and {tuple(s.shape)}\n{api}: Fix: pass one row and column per box.")
    size = int(np.asarray(max_output_size))
    return np.array(_nms(None, s, size, overlap_threshold, score_threshold, 0.0, o)[0], np.int32)


def _check_iou(iou_threshold: float, api: str) -> None:
    if not 0 <= float(iou_threshold) <= 1:
        raise InvalidArgumentError(f"iou_threshold must be in [0, 1]\n{api}: received "
                                   f"iou_threshold={iou_threshold!r}; Fix: pass e.g. 0.5.")


def non_max_suppression_with_scores(boxes: Any, scores: Any, max_output_size: int,
                                    iou_threshold: float = 0.5, score_threshold: float = float("-inf"),
                                    soft_nms_sigma: float = 0.0,
                                    name: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """NMS that also returns the (soft-NMS re-weighted) scores
    (``tf.image.non_max_suppression_with_scores``).

    With ``soft_nms_sigma > 0`` overlapping boxes are not dropped but their scores scaled by
    ``exp(-iou**2 / (2 * sigma))`` (Bodla et al., 2017), and re-queued.

    Args:
      boxes: ``[num_boxes, 4]``.
      scores: ``[num_boxes]``.
      max_output_size: the most indices to return.
      iou_threshold: as for ``non_max_suppression``.
      score_threshold: as for ``non_max_suppression``.
      soft_nms_sigma: 0 for hard NMS.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``(selected_indices int32 [M], selected_scores float32 [M])``.
    """
    del name
    api = "tps.image.non_max_suppression_with_scores"
    b, s, size = _check_nms(boxes, scores, max_output_size, api)
    _check_iou(iou_threshold, api)
    if soft_nms_sigma < 0:
        raise InvalidArgumentError(f"soft_nms_sigma must be non-negative\n{api}: received "
                                   f"{soft_nms_sigma!r}; Fix: pass 0 for hard NMS or e.g. 0.5.")
    idx, sc = _nms(b, s, size, iou_threshold, score_threshold, float(soft_nms_sigma))
    return np.array(idx, np.int32), np.array(sc, _F)


def non_max_suppression_padded(boxes: Any, scores: Any, max_output_size: int, iou_threshold: float = 0.5,
                               score_threshold: float = float("-inf"), pad_to_max_output_size: bool = False,
                               name: str | None = None, sorted_input: bool = False,
                               canonicalized_coordinates: bool = False,
                               tile_size: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """NMS with a fixed-size result (``tf.image.non_max_suppression_padded``).

    Args:
      boxes: ``[..., num_boxes, 4]`` (a batch needs ``pad_to_max_output_size=True``).
      scores: ``[..., num_boxes]``.
      max_output_size: the length of the padded result.
      iou_threshold: as for ``non_max_suppression``.
      score_threshold: as for ``non_max_suppression``.
      pad_to_max_output_size: pad the indices with zeros to ``max_output_size``.
      name: accepted for TensorFlow compatibility; unused.
      sorted_input: accepted (TensorFlow's speed hint); the result does not depend on it.
      canonicalized_coordinates: accepted (TensorFlow's speed hint); corners may be in any order.
      tile_size: accepted (TensorFlow's speed hint).

    Returns:
      ``(selected_indices int32 [..., M], valid_outputs int32 [...])``.
    """
    del name, sorted_input, canonicalized_coordinates, tile_size
    api = "tps.image.non_max_suppression_padded"
    b = np.asarray(boxes, _F)
    s = np.asarray(scores, _F)
    if b.ndim > 2 and not pad_to_max_output_size:
        raise ValueError(f"'pad_to_max_output_size' (value {pad_to_max_output_size}) must be True for "
                         f"batched input\n{api}: Fix: pass pad_to_max_output_size=True for boxes of "
                         f"shape {tuple(b.shape)}.")
    size = int(np.asarray(max_output_size))
    flat_b = b.reshape((-1,) + b.shape[-2:])
    flat_s = s.reshape((-1, s.shape[-1]))
    indices = np.zeros((flat_b.shape[0], size), np.int32)
    valid = np.zeros(flat_b.shape[0], np.int32)
    for k in range(flat_b.shape[0]):
        bk, sk, _ = _check_nms(flat_b[k], flat_s[k], size, api)
        chosen = _nms(bk, sk, size, iou_threshold, score_threshold, 0.0)[0]
        indices[k, :len(chosen)] = chosen
        valid[k] = len(chosen)
    if not pad_to_max_output_size:
        return indices[0, :valid[0]], valid[0]
    return indices.reshape(b.shape[:-2] + (size,)), valid.reshape(b.shape[:-2])


def combined_non_max_suppression(boxes: Any, scores: Any, max_output_size_per_class: int, max_total_size: int,
                                  iou_threshold: float = 0.5, score_threshold: float = float("-inf"),
                                  pad_per_class: bool = False, clip_boxes: bool = True,
                                  name: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-class greedy NMS, then the best boxes over all classes (``tf.image.combined_non_max_suppression``).

    For each batch entry and class, NMS as ``non_max_suppression`` keeps at most
    ``max_output_size_per_class`` boxes scoring above ``score_threshold``; the kept boxes of all
    classes are then ordered by descending score and the first ``max_total_size`` returned,
    zero-padded. Equal scores: TensorFlow leaves their order unspecified; here a lower box index
    (and then a lower class) comes first.

    Args:
      boxes: ``[batch, num_boxes, q, 4]`` float, ``q`` 1 (boxes shared by the classes) or
        ``num_classes``.
      scores: ``[batch, num_boxes, num_classes]``.
      max_output_size_per_class: the most boxes kept per class (> 0).
      max_total_size: the most boxes kept per batch entry (> 0).
      iou_threshold: a box whose IoU with a kept box of its class exceeds this is dropped.
      score_threshold: boxes scoring at or below this are never kept.
      pad_per_class: pad to ``min(max_total_size, max_output_size_per_class * num_classes)``
        instead of ``max_total_size``.
      clip_boxes: clip the returned coordinates to ``[0, 1]``.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``(nmsed_boxes [batch, size, 4] float32, nmsed_scores [batch, size] float32,
      nmsed_classes [batch, size] float32, valid_detections [batch] int32)``.
    """
    del name
    api = "tps.image.combined_non_max_suppression"
    b = np.asarray(boxes, _F)
    s = np.asarray(scores, _F)
    fix = f"\n{api}: Fix: boxes [batch, num_boxes, q, 4] (q = 1 or num_classes), scores [batch, num_boxes, num_classes]."
    if b.ndim != 4:
        raise InvalidArgumentError(f"boxes must be 4-D [batch, num_boxes, q, 4], got shape {list(b.shape)}" + fix)
    if s.ndim != 3:
        raise InvalidArgumentError(f"scores must be 3-D [batch, num_boxes, num_classes], got shape {list(s.shape)}"
                                   + fix)
    batch, num_boxes, q = b.shape[:3]
    num_classes = s.shape[2]
    if q not in (1, num_classes):
        raise InvalidArgumentError("third dimension of boxes must be either 1 or num classes" + fix)
    if b.shape[3] != 4:
        raise InvalidArgumentError("boxes must have 4 columns" + fix)
    if s.shape[1] != num_boxes:
        raise InvalidArgumentError("scores has incompatible shape" + fix)
    if s.shape[0] != batch:
        raise InvalidArgumentError("boxes and scores must have same batch size" + fix)
    per_class = int(np.asarray(max_output_size_per_class))
    total = int(np.asarray(max_total_size))
    if per_class <= 0:
        raise InvalidArgumentError(f"max_size_per_class must be positive\n{api}: Fix: pass "
                                   f"max_output_size_per_class >= 1 (received {per_class}).")
    if total <= 0:
        raise InvalidArgumentError(f"max_total_size must be > 0\n{api}: Fix: pass max_total_size >= 1 "
                                   f"(received {total}).")
    _check_iou(iou_threshold, api)
    size = min(total, per_class * num_classes) if pad_per_class else total
    out_boxes = np.zeros((batch, size, 4), _F)
    out_scores = np.zeros((batch, size), _F)
    out_classes = np.zeros((batch, size), _F)
    valid = np.zeros(batch, np.int32)
    keep = min(per_class, num_boxes)
    for k in range(batch):
        found: list[tuple[float, int, int, np.ndarray]] = []
        for c in range(num_classes):
            class_boxes = b[k, :, c if q > 1 else 0, :]
            chosen, kept_scores = _nms(class_boxes, s[k, :, c], keep, iou_threshold, score_threshold, 0.0)
            found.extend((score, c, rank, class_boxes[i]) for rank, (i, score) in enumerate(
                zip(chosen, kept_scores, strict=True)))
        found.sort(key=lambda item: (-item[0], item[1], item[2]))
        n = min(len(found), size)
        valid[k] = n
        for j, (score, c, _rank, box) in enumerate(found[:n]):
            out_boxes[k, j] = np.clip(box, _F(0), _F(1)) if clip_boxes else box
            out_scores[k, j] = score
            out_classes[k, j] = c
    return out_boxes, out_scores, out_classes, valid


def crop_and_resize(image: Any, boxes: Any, box_indices: Any, crop_size: Any, method: str = "bilinear",
                    extrapolation_value: float = 0.0, name: str | None = None) -> np.ndarray:
    """Crops boxes out of a batch and resizes each to ``crop_size`` (``tf.image.crop_and_resize``).

    Sampling aligns the box corners with the corner pixel centres: row ``y`` of a crop reads
    ``y1 * (h - 1) + y * (y2 - y1) * (h - 1) / (crop_h - 1)`` (the box centre for a 1-row crop);
    samples outside the image take ``extrapolation_value``.

    Args:
      image: ``[batch, height, width, depth]``, any real dtype.
      boxes: ``[num_boxes, 4]`` normalised ``[y1, x1, y2, x2]`` (``y1 > y2`` flips the crop).
      box_indices: ``[num_boxes]`` int, the batch entry of each box.
      crop_size: ``[crop_height, crop_width]``, both positive.
      method: ``'bilinear'`` or ``'nearest'``.
      extrapolation_value: the value of samples outside the image.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      float32 ``[num_boxes, crop_height, crop_width, depth]``.
    """
    del name
    api = "tps.image.crop_and_resize"
    images = as_image(image, api, "image")
    if images.ndim != 4:
        raise InvalidArgumentError(f"input image must be 4-D; received shape {tuple(images.shape)}\n"
                                   f"{api}: Fix: add a batch axis: image[None].")
    b = np.asarray(boxes, _F)
    ind = np.asarray(box_indices)
    if b.ndim != 2 or b.shape[1] != 4 or ind.shape != (b.shape[0],):
        raise InvalidArgumentError(
            f"boxes must be 2-D [num_boxes, 4] and box_indices [num_boxes]; received "
            f"{tuple(b.shape)} and {tuple(ind.shape)}\n{api}: Fix: one box_indices entry per box.")
    ch, cw = (int(v) for v in np.asarray(crop_size).reshape(-1))
    if ch <= 0 or cw <= 0:
        raise InvalidArgumentError(f"crop dimensions must be positive\n{api}: received crop_size="
                                   f"{crop_size!r}; Fix: pass two positive ints.")
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"method must be 'bilinear' or 'nearest'\n{api}: received method={method!r}.")
    batch, h, w, depth = images.shape
    if np.any((ind < 0) | (ind >= batch)):
        raise InvalidArgumentError(f"box_index has values outside [0, batch_size)\n{api}: received "
                                   f"{ind.tolist()} for a batch of {batch}.")
    x = images.astype(_F)
    out = np.full((b.shape[0], ch, cw, depth), _F(extrapolation_value), _F)
    for n in range(b.shape[0]):
        y1, x1, y2, x2 = b[n]
        ys = _sample_positions(y1, y2, h, ch)
        xs = _sample_positions(x1, x2, w, cw)
        img = x[int(ind[n])]
        ok_y = (ys >= 0) & (ys <= _F(h - 1))
        ok_x = (xs >= 0) & (xs <= _F(w - 1))
        if method == "bilinear":
            top = np.floor(ys).astype(np.int64).clip(0, h - 1)
            bottom = np.ceil(ys).astype(np.int64).clip(0, h - 1)
            left = np.floor(xs).astype(np.int64).clip(0, w - 1)
            right = np.ceil(xs).astype(np.int64).clip(0, w - 1)
            ly = (ys - np.floor(ys)).astype(_F)[:, None, None]
            lx = (xs - np.floor(xs)).astype(_F)[None, :, None]
            tl, tr = img[top][:, left], img[top][:, right]
            bl, br = img[bottom][:, left], img[bottom][:, right]
            t = tl + (tr - tl) * lx
            bo = bl + (br - bl) * lx
            crop = (t + (bo - t) * ly).astype(_F)
        else:
            ry = np.clip(_round_half_away(ys), 0, h - 1)
            rx = np.clip(_round_half_away(xs), 0, w - 1)
            crop = img[ry][:, rx]
        mask = ok_y[:, None] & ok_x[None, :]
        out[n] = np.where(mask[:, :, None], crop, out[n])
    return out


def _round_half_away(values: np.ndarray) -> np.ndarray:
    return np.asarray((np.sign(values) * np.floor(np.abs(values) + _F(0.5))).astype(np.int64))


def _sample_positions(lo: np.float32, hi: np.float32, size: int, count: int) -> np.ndarray:
    if count > 1:
        scale = _F(_F(hi - lo) * _F(size - 1)) / _F(count - 1)
        return (lo * _F(size - 1) + np.arange(count, dtype=_F) * scale).astype(_F)
    return np.full(1, _F(0.5) * _F(lo + hi) * _F(size - 1), _F)


_DEFAULT_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1],
                            [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]], _F)


def draw_bounding_boxes(images: Any, boxes: Any, colors: Any, name: str | None = None) -> np.ndarray:
    """Draws one-pixel box outlines on a batch of images (``tf.image.draw_bounding_boxes``).

    A box's edge at ``y * (height - 1)`` (truncated) is drawn when it lies in the image; boxes
    cycle through ``colors`` (TensorFlow's ten-colour palette when ``colors`` is None or empty).

    Args:
      images: float ``[batch, height, width, depth]``, depth 1, 3 or 4.
      boxes: ``[batch, num_boxes, 4]`` normalised ``[y_min, x_min, y_max, x_max]``.
      colors: ``[num_colors, >= depth]`` RGBA rows, or None.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      A copy of ``images`` with the outlines drawn.
    """
    del name
    api = "tps.image.draw_bounding_boxes"
    canvas = as_image(images, api, "images").copy()
    if canvas.ndim != 4:
        raise InvalidArgumentError(f"The rank of the images should be 4; received shape "
                                   f"{tuple(canvas.shape)}\n{api}: Fix: add a batch axis: images[None].")
    batch, height, width, depth = canvas.shape
    if depth not in (1, 3, 4):
        raise InvalidArgumentError(f"Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)\n"
                                   f"{api}: received depth {depth}.")
    b = np.asarray(boxes, _F)
    if b.ndim != 3 or b.shape[0] != batch or b.shape[2] != 4:
        raise InvalidArgumentError(f"boxes must be [batch, num_boxes, 4] with batch {batch}; received "
                                   f"{tuple(b.shape)}\n{api}: Fix: pass boxes[None] for one image.")
    table = _DEFAULT_COLORS.copy()
    if colors is not None and np.asarray(colors).size:
        table = np.asarray(colors, _F).reshape(-1, np.asarray(colors).shape[-1])
        if table.shape[1] < depth:
            raise InvalidArgumentError(f"colors must have at least {depth} columns; received "
                                       f"{tuple(table.shape)}\n{api}: Fix: pass RGBA rows.")
    elif depth == 1:
        table[:, 0] = 1
    for i in range(batch):
        for k in range(b.shape[1]):
            color = table[k % len(table), :depth].astype(canvas.dtype)
            top, bottom = int(b[i, k, 0] * _F(height - 1)), int(b[i, k, 2] * _F(height - 1))
            left, right = int(b[i, k, 1] * _F(width - 1)), int(b[i, k, 3] * _F(width - 1))
            if top > bottom or left > right:
                continue
            if top >= height or bottom < 0 or left >= width or right < 0:
                continue
            r0, r1 = max(top, 0), min(bottom, height - 1)
            c0, c1 = max(left, 0), min(right, width - 1)
            if top >= 0:
                canvas[i, top, c0:c1 + 1] = color
            if bottom < height:
                canvas[i, bottom, c0:c1 + 1] = color
            if left >= 0:
                canvas[i, r0:r1 + 1, left] = color
            if right < width:
                canvas[i, r0:r1 + 1, right] = color
    return canvas
