"""The C backend's products: BLAS calls planned over any strides, batched products,
few-column products and the penalised weight update."""
