"""Image ops (``tf.image`` counterparts, ``tps.image``): NumPy only, for ``tpsd`` pipelines.

Every function takes and returns NumPy arrays, with TensorFlow's argument names, defaults,
dtypes and errors, so ``tf.image.X`` becomes ``tps.image.X`` inside a ``Dataset.map`` function.
"""

from tpustrategy._src.image.boxes import (
    combined_non_max_suppression as combined_non_max_suppression,
)
from tpustrategy._src.image.boxes import crop_and_resize as crop_and_resize
from tpustrategy._src.image.boxes import draw_bounding_boxes as draw_bounding_boxes
from tpustrategy._src.image.boxes import non_max_suppression as non_max_suppression
from tpustrategy._src.image.boxes import (
    non_max_suppression_overlaps as non_max_suppression_overlaps,
)
from tpustrategy._src.image.boxes import non_max_suppression_padded as non_max_suppression_padded
from tpustrategy._src.image.boxes import (
    non_max_suppression_with_scores as non_max_suppression_with_scores,
)
from tpustrategy._src.image.color import adjust_brightness as adjust_brightness
from tpustrategy._src.image.color import adjust_contrast as adjust_contrast
from tpustrategy._src.image.color import adjust_gamma as adjust_gamma
from tpustrategy._src.image.color import adjust_hue as adjust_hue
from tpustrategy._src.image.color import adjust_saturation as adjust_saturation
from tpustrategy._src.image.color import grayscale_to_rgb as grayscale_to_rgb
from tpustrategy._src.image.color import hsv_to_rgb as hsv_to_rgb
from tpustrategy._src.image.color import per_image_standardization as per_image_standardization
from tpustrategy._src.image.color import rgb_to_grayscale as rgb_to_grayscale
from tpustrategy._src.image.color import rgb_to_hsv as rgb_to_hsv
from tpustrategy._src.image.color import rgb_to_yiq as rgb_to_yiq
from tpustrategy._src.image.color import rgb_to_yuv as rgb_to_yuv
from tpustrategy._src.image.color import yiq_to_rgb as yiq_to_rgb
from tpustrategy._src.image.color import yuv_to_rgb as yuv_to_rgb
from tpustrategy._src.image.distorted_box import (
    sample_distorted_bounding_box as sample_distorted_bounding_box,
)
from tpustrategy._src.image.distorted_box import (
    stateless_sample_distorted_bounding_box as stateless_sample_distorted_bounding_box,
)
from tpustrategy._src.image.dtypes import convert_image_dtype as convert_image_dtype
from tpustrategy._src.image.geometry import central_crop as central_crop
from tpustrategy._src.image.geometry import crop_to_bounding_box as crop_to_bounding_box
from tpustrategy._src.image.geometry import flip_left_right as flip_left_right
from tpustrategy._src.image.geometry import flip_up_down as flip_up_down
from tpustrategy._src.image.geometry import pad_to_bounding_box as pad_to_bounding_box
from tpustrategy._src.image.geometry import resize_with_crop_or_pad as resize_with_crop_or_pad
from tpustrategy._src.image.geometry import rot90 as rot90
from tpustrategy._src.image.geometry import transpose as transpose
from tpustrategy._src.image.gradients import image_gradients as image_gradients
from tpustrategy._src.image.gradients import sobel_edges as sobel_edges
from tpustrategy._src.image.jpeg_quality import adjust_jpeg_quality as adjust_jpeg_quality
from tpustrategy._src.image.jpeg_quality import random_jpeg_quality as random_jpeg_quality
from tpustrategy._src.image.jpeg_quality import (
    stateless_random_jpeg_quality as stateless_random_jpeg_quality,
)
from tpustrategy._src.image.quality import extract_patches as extract_patches
from tpustrategy._src.image.quality import psnr as psnr
from tpustrategy._src.image.quality import ssim as ssim
from tpustrategy._src.image.quality import ssim_multiscale as ssim_multiscale
from tpustrategy._src.image.quality import total_variation as total_variation
from tpustrategy._src.image.random_ops import random_brightness as random_brightness
from tpustrategy._src.image.random_ops import random_contrast as random_contrast
from tpustrategy._src.image.random_ops import random_crop as random_crop
from tpustrategy._src.image.random_ops import random_flip_left_right as random_flip_left_right
from tpustrategy._src.image.random_ops import random_flip_up_down as random_flip_up_down
from tpustrategy._src.image.random_ops import random_hue as random_hue
from tpustrategy._src.image.random_ops import random_saturation as random_saturation
from tpustrategy._src.image.random_ops import (
    stateless_random_brightness as stateless_random_brightness,
)
from tpustrategy._src.image.random_ops import stateless_random_contrast as stateless_random_contrast
from tpustrategy._src.image.random_ops import stateless_random_crop as stateless_random_crop
from tpustrategy._src.image.random_ops import (
    stateless_random_flip_left_right as stateless_random_flip_left_right,
)
from tpustrategy._src.image.random_ops import (
    stateless_random_flip_up_down as stateless_random_flip_up_down,
)
from tpustrategy._src.image.random_ops import stateless_random_hue as stateless_random_hue
from tpustrategy._src.image.random_ops import (
    stateless_random_saturation as stateless_random_saturation,
)
from tpustrategy._src.image.resize import ResizeMethod as ResizeMethod
from tpustrategy._src.image.resize import resize as resize
from tpustrategy._src.image.resize import resize_with_pad as resize_with_pad

# The codecs are tf.io's, exported under tf.image too (as TensorFlow does).
from tpustrategy._src.io.image_ops import decode_and_crop_jpeg as decode_and_crop_jpeg
from tpustrategy._src.io.image_ops import decode_bmp as decode_bmp
from tpustrategy._src.io.image_ops import decode_gif as decode_gif
from tpustrategy._src.io.image_ops import decode_image as decode_image
from tpustrategy._src.io.image_ops import decode_jpeg as decode_jpeg
from tpustrategy._src.io.image_ops import decode_png as decode_png
from tpustrategy._src.io.image_ops import encode_jpeg as encode_jpeg
from tpustrategy._src.io.image_ops import encode_png as encode_png
from tpustrategy._src.io.image_ops import extract_jpeg_shape as extract_jpeg_shape
from tpustrategy._src.io.jpeg_check import is_jpeg as is_jpeg
from tpustrategy._src.not_provided import not_provided as _not_provided

# TensorFlow names without a counterpart (README, "TensorFlow names we do not have").
decode_jxl = _not_provided("tf.image.decode_jxl")
decode_webp = _not_provided("tf.image.decode_webp")
extract_glimpse = _not_provided("tf.image.extract_glimpse")
generate_bounding_box_proposals = _not_provided("tf.image.generate_bounding_box_proposals")
