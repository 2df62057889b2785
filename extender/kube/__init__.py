"""The Kubernetes client (`client`: configuration, the API calls the extender makes) and the
supported minors (`versions`). No placement logic; the state and server layers call it."""
