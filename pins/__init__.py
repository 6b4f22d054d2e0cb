"""Image digests read from their registries into config/versions.py's IMAGE_DIGESTS table.

`python -m pins` pins every tag-only image the program and `validate` use; `python -m pins
--check` reads every pinned tag again and names the ones whose tag has moved. Both print
one line an image, and a line for each image that could not be read, and exit 1 then."""
