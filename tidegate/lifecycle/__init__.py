"""What a job does when its pods are evicted or fail: Volcano's vcjob lifecycle policies, shared by the
simulator and the live control plane."""
