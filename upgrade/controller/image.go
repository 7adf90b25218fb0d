package controller

import v1 "k8s.io/api/core/v1"

func containerImage(cs []v1.Container, name string) string {
	for _, c := range cs {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
