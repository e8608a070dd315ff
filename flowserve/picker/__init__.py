"""flowserve as Envoy's endpoint picker: the Gateway API Inference Extension's protocol over
Envoy's ext_proc, on the gateway's scheduler core (`flowserve epp`, `flowserve.epp(...)`),
and the Envoy the tests and benchmarks run (`flowserve.picker.envoy`).

Envoy (or any GIE gateway) carries the bytes; flowserve decides where each request goes,
holds it while every engine is full, and learns from the response path how it ended —
so its view of load, programs, tenants and cached prefixes stays what it is when the
gateway relays the requests itself. See docs/envoy.md.
"""
